package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/coderun-rpc/coderun-rpc/config"
	"github.com/coderun-rpc/coderun-rpc/internal/buildinfo"
	"github.com/coderun-rpc/coderun-rpc/mcp"
	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
)

// loadMCP reads the upstream MCP servers file (none when unset); ${VAR}
// references in it expand from the daemon's environment.
func loadMCP(cfg *config.Config) ([]upstream.Spec, error) {
	if cfg.MCPConfig == "" {
		return nil, nil
	}
	return upstream.LoadConfig(cfg.MCPConfig, os.LookupEnv)
}

// serveMCP is `coderun-rpc mcp`: the code-mode MCP server on stdin and the
// protocol stdout, until the client goes away or a signal arrives.
func serveMCP(ctx context.Context, d *daemonEnv, out io.WriteCloser) int {
	cfg, pool, log := d.cfg, d.pool, d.log
	var names config.PythonNames
	if len(pool.Servers()) > 0 { // a server's global may be none of the interpreter's names
		var err error
		if names, err = config.ProbeNames(cfg.Python, config.Options{}); err != nil {
			fmt.Fprintf(os.Stderr, "coderun-rpc: %v\n", err)
			return 2
		}
	}
	m := newManager(cfg, log, 0, d.proxy, d.preloaded)
	defer m.Shutdown()
	srv, err := mcp.New(mcp.Options{Manager: m, Pool: pool, Limits: cfg.Limits, Packages: cfg.Packages.Allow,
		PythonVersion: cfg.PythonVersion, Version: buildinfo.Version(), Logger: log,
		Builtins: names.Builtins, Modules: names.Modules, Egress: cfg.Egress})
	if err != nil {
		fmt.Fprintf(os.Stderr, "coderun-rpc: %v\n", err)
		return 2
	}
	log.Info("serving MCP", "python", cfg.Python, "upstreams", len(pool.Servers()))
	err = srv.Serve(ctx, mcp.Stdio(os.Stdin, out, log))
	log.Info("MCP client gone", "err", err)
	return 0
}
