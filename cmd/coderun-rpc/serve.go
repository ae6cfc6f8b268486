package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/coderun-rpc/coderun-rpc/config"
	"github.com/coderun-rpc/coderun-rpc/serve"
	"github.com/coderun-rpc/coderun-rpc/tracing"
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

// serveMode is `coderun-rpc serve`: one Manager shared by every connection.
func serveMode(ctx context.Context, cfg *config.Config, log *slog.Logger, tr *tracing.Tracer, listen serve.Addr, admin string) int {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	return serve.Run(ctx, serve.Options{
		Listen: listen, Admin: admin, Token: cfg.AuthToken,
		MaxConnections: cfg.MaxConnections, MaxRunsPerConnection: cfg.MaxRunsPerConnection,
		Drain: ms(cfg.DrainMs), WriteStall: ms(cfg.WriteStallMs),
		Manager: newManager(cfg, log), Tracer: tr, Server: rpcOptions(cfg, log), Logger: log,
	})
}
