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

// serveArgs parses `serve`'s flags: --listen is required; --admin takes
// the same forms, or a plain HOST:PORT (the zero Addr when absent).
func serveArgs(args []string) (listen, admin serve.Addr, err error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listenText := fs.String("listen", "", "unix:PATH, tcp:HOST:PORT or ws://HOST:PORT/PATH")
	adminText := fs.String("admin", "", "HOST:PORT, tcp:HOST:PORT or unix:PATH of /healthz, /readyz and /metrics")
	if err := fs.Parse(args); err != nil {
		return listen, admin, err
	}
	if fs.NArg() > 0 {
		return listen, admin, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *listenText == "" {
		return listen, admin, fmt.Errorf("--listen ADDR is required")
	}
	if listen, err = serve.ParseAddr(*listenText); err != nil || *adminText == "" {
		return listen, admin, err
	}
	admin, err = serve.ParseAdminAddr(*adminText)
	return listen, admin, err
}

// serveMode is `coderun-rpc serve`: one Manager shared by every connection;
// each connection reaches the upstream MCP servers as a stdio client does.
func serveMode(ctx context.Context, d *daemonEnv, listen, admin serve.Addr) int {
	cfg := d.cfg
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	server := rpcOptions(cfg, d.log)
	server.MCP = d.pool
	m := newManager(cfg, d.log, cfg.MaxSessionsPerConnection, d.proxy, d.preloaded)
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
