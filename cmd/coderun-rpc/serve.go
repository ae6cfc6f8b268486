package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/coderun-rpc/coderun-rpc/rpc"
	"github.com/coderun-rpc/coderun-rpc/serve"
)

// serveArgs parses `serve`'s flags: --listen is required.
func serveArgs(args []string) (serve.Addr, string, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "", "unix:PATH, tcp:HOST:PORT or ws://HOST:PORT/PATH")
	admin := fs.String("admin", "", "HOST:PORT of /healthz, /readyz and /metrics")
	if err := fs.Parse(args); err != nil {
		return serve.Addr{}, "", err
	}
	if fs.NArg() > 0 {
		return serve.Addr{}, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *listen == "" {
		return serve.Addr{}, "", fmt.Errorf("--listen ADDR is required")
	}
	a, err := serve.ParseAddr(*listen)
	return a, *admin, err
}

// serveMode is `coderun-rpc serve`: one Manager shared by every connection;
// each connection reaches the upstream MCP servers as a stdio client does.
func serveMode(ctx context.Context, d *daemonEnv, listen serve.Addr, admin string) int {
	cfg := d.cfg
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	server := rpcOptions(cfg, d.log)
	server.MCP = d.pool
	m := newManager(cfg, d.log, cfg.MaxSessionsPerConnection)
	reportSessions(&server, cfg, m) // serve gives each connection its own Sessions
	return serve.Run(ctx, serve.Options{
		Listen: listen, Admin: admin, Token: cfg.AuthToken,
		MaxConnections: cfg.MaxConnections, MaxRunsPerConnection: cfg.MaxRunsPerConnection,
		Drain: ms(cfg.DrainMs), WriteStall: ms(cfg.WriteStallMs),
		MaxUnauthenticated: cfg.MaxUnauthenticated, AuthTimeout: ms(cfg.AuthTimeoutMs), MaxUnsent: cfg.MaxUnsentBytes, MaxUnsentTotal: cfg.MaxUnsentTotal,
		Manager: m, Tracer: d.tr, Server: server, Logger: d.log,
		WrapRunner: func(r rpc.Runner) rpc.Runner { return rpc.WithMCP(r, d.pool, cfg.Limits) },
	})
}
