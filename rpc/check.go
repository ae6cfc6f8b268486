package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/coderun-rpc/coderun-rpc/config"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// The --check smoke run: a real Server and Runner driven in-process through
// pipes, exactly as a client would over stdio.

const checkProgram = `print("hello from the smoke run")
r = await check.echo({"n": 41})
return r["n"] + 1`

// Check initializes a server, runs one program that prints and awaits a
// binding, verifies the result, shuts down and exits. It returns a readable
// report and the first failure.
func Check(ctx context.Context, cfg *config.Config, log *slog.Logger, version string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	srvIn, clientW := io.Pipe()
	clientR, srvOut := io.Pipe()
	srv := New(Options{In: srvIn, Out: srvOut, Config: cfg, Runner: NewRunner(cfg, log), Logger: log, Version: version})
	served := make(chan int, 1)
	go func() { served <- srv.Serve(ctx); srvOut.Close() }()
	var report strings.Builder
	errc := make(chan error, 1)
	go func() { errc <- checkConversation(clientW, newFrameReader(clientR), &report) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = errors.New("no answer within 60 s")
	}
	clientW.Close()
	select {
	case code := <-served:
		if err == nil && code != 0 {
			err = fmt.Errorf("server exited with code %d", code)
		}
	case <-time.After(30 * time.Second):
		if err == nil {
			err = errors.New("server did not exit")
		}
	}
	return report.String(), err
}

func checkConversation(w io.Writer, r *frameReader, report *strings.Builder) error {
	send := func(body string) error {
		_, err := fmt.Fprintf(w, "Content-Length: %d\r\n\r\n%s", len(body), body)
		return err
	}
	if err := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"coderun-rpc --check"}}}`); err != nil {
		return err
	}
	if _, err := expectResult(r, "1"); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	fmt.Fprintln(report, "initialize: ok")
	run := `{"jsonrpc":"2.0","id":2,"method":"run","params":{"program":` + quote(checkProgram) +
		`,"bindings":[{"global":"check","functions":["echo"]}],"limits":{"maxWallMs":30000}}}`
	if err := send(run); err != nil {
		return err
	}
	start := time.Now()
	var result []wireguard.Member
	for result == nil {
		body, err := r.next()
		if err != nil {
			return fmt.Errorf("run: reading: %w", err)
		}
		ms, _ := wireguard.Members(body, wireguard.Lax)
		if m, ok := wireguard.Last(ms, "method"); ok && string(m.Value) == `"binding/call"` {
			id, _ := wireguard.Last(ms, "id")
			pm, _ := wireguard.Last(ms, "params")
			pms, _ := wireguard.Members(pm.Value, wireguard.Lax)
			args, _ := wireguard.Last(pms, "args")
			if err := send(`{"jsonrpc":"2.0","id":` + string(id.Value) + `,"result":` + string(args.Value) + `}`); err != nil {
				return err
			}
			fmt.Fprintln(report, "binding/call: answered", string(args.Value))
			continue
		}
		if result, err = resultOf(ms, "2"); err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}
	value, _ := wireguard.Last(result, "value")
	logs, _ := wireguard.Last(result, "logs")
	stats, _ := wireguard.Last(result, "stats")
	fmt.Fprintf(report, "run: value %s, logs %s, %v\n", value.Value, logs.Value, time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(report, "run stats: %s\n", stats.Value)
	if e, ok := wireguard.Last(result, "error"); ok {
		return fmt.Errorf("the smoke program failed: %s", e.Value)
	}
	if string(value.Value) != "42" || string(logs.Value) != `["hello from the smoke run"]` {
		return errors.New("unexpected smoke result")
	}
	if err := send(`{"jsonrpc":"2.0","id":3,"method":"shutdown"}`); err != nil {
		return err
	}
	if _, err := expectResult(r, "3"); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	fmt.Fprintln(report, "shutdown: ok")
	return send(`{"jsonrpc":"2.0","method":"exit"}`)
}

func expectResult(r *frameReader, id string) ([]wireguard.Member, error) {
	body, err := r.next()
	if err != nil {
		return nil, err
	}
	ms, _ := wireguard.Members(body, wireguard.Lax)
	return resultOf(ms, id)
}

func resultOf(ms []wireguard.Member, id string) ([]wireguard.Member, error) {
	if m, ok := wireguard.Last(ms, "id"); !ok || string(m.Value) != id {
		return nil, fmt.Errorf("unexpected message (id %s)", m.Value)
	}
	if e, ok := wireguard.Last(ms, "error"); ok {
		return nil, fmt.Errorf("error response %s", e.Value)
	}
	res, _ := wireguard.Last(ms, "result")
	out, _ := wireguard.Members(res.Value, wireguard.Lax)
	if out == nil {
		out = []wireguard.Member{}
	}
	return out, nil
}
