// Package selfcheck is the smoke conversation of `coderun-rpc --check`: it
// drives a server, through the public Go client (clients/go) over in-memory pipes,
// exactly as a client would over stdio (initialize, a run that prints and
// awaits a binding, the result verified, shutdown, exit) and reports it.
//
// It does not build the server: main passes a Serve, so this package knows
// nothing of rpc's constructor or of the configuration.
package selfcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	coderun "github.com/coderun-rpc/coderun-rpc/clients/go"
)

// Serve serves one connection reading in and writing out until the client
// sends exit or closes in, and returns the process exit code it would end
// with.
type Serve func(ctx context.Context, in io.Reader, out io.Writer) int

// The bounds of the whole conversation and of the server's exit after it.
const (
	answerTimeout = 60 * time.Second // the failure says "60 s"
	exitTimeout   = 30 * time.Second
)

// program prints, awaits a binding, and imports a module of the
// interpreter's site-packages as a program would (pip first, the cheapest to
// import; else the first that imports), so that a sandbox that cannot read
// the packages next to the daemon fails here, naming the path.
const program = `print("hello from the smoke run")
r = await check.echo({"n": 41})
import importlib, os, site
found = unreadable = None
for folder in site.getsitepackages():
    try:
        names = sorted(os.listdir(folder), key=lambda n: n != "pip")
    except FileNotFoundError:
        continue
    except OSError:
        unreadable = folder
        break
    for name in names[:20]:
        stem = name[:-3] if name.endswith(".py") else name
        if not stem.isidentifier() or stem.startswith("_"):
            continue
        try:
            importlib.import_module(stem)
        except OSError as e:
            unreadable = e.filename or folder
            break
        except Exception:
            continue
        found = os.path.join(folder, name)
        break
    if found or unreadable:
        break
return {"n": r["n"] + 1, "sitePackages": found, "unreadable": unreadable}`

// Run starts serve on pipes, holds the smoke conversation with it and waits
// for it to exit. It returns the readable report (one line per step) and the
// first failure: a step's, or the server's exit code if not 0.
func Run(ctx context.Context, serve Serve) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	srvIn, clientW := io.Pipe()
	clientR, srvOut := io.Pipe()
	served := make(chan int, 1)
	go func() {
		served <- serve(ctx, srvIn, srvOut)
		srvOut.Close() // the client reads to the end
		srvIn.Close()  // and cannot write to a server that is gone
	}()
	rep := &report{}
	errc := make(chan error, 1)
	go func() { errc <- converse(ctx, pipes{clientR, clientW}, rep) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = errors.New("no answer within 60 s")
	}
	clientW.Close()
	select {
	case code := <-served:
		if err == nil && code != 0 {
			err = fmt.Errorf("server exited with code %d", code)
		}
	case <-time.After(exitTimeout):
		if err == nil {
			err = errors.New("server did not exit")
		}
	}
	return rep.String(), err
}

// report is the readable transcript; the read goroutine adds to it too.
type report struct {
	mu sync.Mutex
	b  strings.Builder
}

func (r *report) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.b, format, args...)
}

func (r *report) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.String()
}

// pipes is the client's side of the server's stdio; closing it ends the
// server's input.
type pipes struct {
	*io.PipeReader
	*io.PipeWriter
}

func (p pipes) Close() error { return p.PipeWriter.Close() }

// echo answers a binding/call with its arguments.
func (r *report) echo(_ context.Context, args json.RawMessage) (any, error) {
	r.printf("binding/call: answered %s\n", args)
	return args, nil
}

func converse(ctx context.Context, conn io.ReadWriteCloser, rep *report) error {
	c, err := coderun.Attach(ctx, conn, coderun.Options{ClientName: "coderun-rpc --check"})
	if err != nil {
		return fmt.Errorf("initialize: %w", refusal(err))
	}
	rep.printf("initialize: ok\n")
	if err := smokeRun(ctx, c, rep); err != nil {
		_ = conn.Close()
		return err
	}
	if err := c.Close(); err != nil { // shutdown, then exit
		return fmt.Errorf("shutdown: %w", refusal(err))
	}
	rep.printf("shutdown: ok\n")
	return nil
}

// smokeRun runs the program and checks its value and logs.
func smokeRun(ctx context.Context, c *coderun.Client, rep *report) error {
	start := time.Now()
	res, err := c.Run(ctx, program, &coderun.RunOptions{
		Bindings: []coderun.Binding{{Global: "check", Functions: []coderun.Function{coderun.Untyped("echo", rep.echo)}}},
		Limits:   &coderun.Limits{MaxWallMs: 30000}})
	var runErr *coderun.RunError
	if err != nil && !errors.As(err, &runErr) {
		return fmt.Errorf("run: %w", refusal(err))
	}
	logs, _ := json.Marshal(res.Logs)
	stats, _ := json.Marshal(res.Stats)
	rep.printf("run: value %s, logs %s, %dms\n", res.Value, logs, time.Since(start).Milliseconds())
	rep.printf("run stats: %s\n", stats)
	if runErr != nil {
		e, _ := json.Marshal(runErr)
		return fmt.Errorf("the smoke program failed: %s", e)
	}
	var v struct {
		N                        int
		SitePackages, Unreadable *string
	}
	if json.Unmarshal(res.Value, &v) != nil || v.N != 42 || string(logs) != `["hello from the smoke run"]` {
		return errors.New("unexpected smoke result")
	}
	switch {
	case v.Unreadable != nil:
		return fmt.Errorf("the program cannot read %s of the interpreter's site-packages", *v.Unreadable)
	case v.SitePackages != nil:
		rep.printf("site-packages: ok (imported %s)\n", *v.SitePackages)
	default:
		rep.printf("site-packages: no module to import\n")
	}
	return nil
}

// refusal spells the server's error response as it was sent.
func refusal(err error) error {
	var e *jsonrpc2.Error
	if errors.As(err, &e) {
		b, _ := json.Marshal(e)
		return fmt.Errorf("error response %s", b)
	}
	return err
}
