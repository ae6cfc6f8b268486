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
	unsent := rpc.NewUnsentBudget(cfg.MaxUnsentTotal)
	return serve.Run(ctx, serve.Options{
		Listen: listen, Admin: admin, Token: cfg.AuthToken,
		MaxConnections: cfg.MaxConnections, MaxRunsPerConnection: cfg.MaxRunsPerConnection,
		Drain: ms(cfg.DrainMs), WriteStall: ms(cfg.WriteStallMs),
		MaxUnauthenticated: cfg.MaxUnauthenticated, AuthTimeout: ms(cfg.AuthTimeoutMs),
		Manager: m, Tracer: d.tr, Logger: d.log,
		RunSlots: server.Daemon.MaxConcurrentRuns + server.Daemon.MaxSessions,
		Unsent:   unsent.Used,
		ServeConn: func(c serve.Conn) int {
			return rpc.New(connOptions(server, c, unsent, cfg.MaxUnsentBytes, d)).Serve(context.Background())
		},
	})
}

// connOptions is one serve connection's rpc.Options: server's, on the
// connection's streams and lane, its unsent output bounded by maxUnsent and
// by the budget every connection shares, its runs routed to the upstream MCP
// servers as a stdio client's are.
func connOptions(server rpc.Options, c serve.Conn, unsent *rpc.UnsentBudget, maxUnsent int64, d *daemonEnv) rpc.Options {
	o := server
	o.In, o.Out, o.Logger, o.FellBehind = c.In, c.Out, c.Log, c.FellBehind
	o.MaxUnsent, o.Unsent = maxUnsent, unsent
	o.Runner, o.Sessions = rpc.WithMCP(c.Runner, d.pool, d.cfg.Limits), c.Sessions
	return o
}
