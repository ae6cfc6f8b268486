package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	coderun "github.com/coderun-rpc/coderun-rpc/clients/go"
)

// goClientRows measures the public Go client (clients/go) against the
// benchmark's own peer (a bare jsonrpc2.Conn over the same frame stream,
// answering binding calls on its read goroutine) in the same run: return 1
// and the sequential binding round trip, each client on a daemon of the same
// binary and configuration, samples interleaved so both see the
// same minute of the shared machine. The floor column is the peer's figure,
// so the ratio is the cost of the client's layers (runs, typed bindings,
// exact params) over the library's.
func goClientRows(o options, hand *daemon) ([]row, error) {
	env := []string{"CODERUN_PYTHON_BIN=" + o.python, "CODERUN_LOG_LEVEL=warn", "CODERUN_MAX_LOG_BYTES=16777216"}
	if _, set := os.LookupEnv("CODERUN_ISOLATION"); !set {
		env = append(env, "CODERUN_ISOLATION=process")
	}
	ctx := context.Background()
	c, err := coderun.Start(ctx, coderun.Options{Command: []string{o.daemon}, Env: env, Stderr: os.Stderr})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	echo := coderun.Untyped("echo", func(_ context.Context, args json.RawMessage) (any, error) { return args, nil })
	opts := &coderun.RunOptions{Bindings: []coderun.Binding{{Global: "tools", Functions: []coderun.Function{echo}}}}
	goRun := func(program string) (time.Duration, error) {
		start := time.Now()
		_, err := c.Run(ctx, program, opts)
		return time.Since(start), err
	}
	handRun := func(program string) (time.Duration, error) {
		start := time.Now()
		_, err := hand.run(program, nil)
		return time.Since(start), err
	}

	var goR1, handR1 samples
	for i := range o.samples + 1 {
		g, err := goRun("return 1")
		if err != nil {
			return nil, err
		}
		h, err := handRun("return 1")
		if err != nil {
			return nil, err
		}
		if i > 0 { // the first of each warms the connection
			goR1, handR1 = append(goR1, g), append(handR1, h)
		}
	}

	n, rounds := 1000, 11 // more rounds than bindingRows: the ratio of two noisy figures
	if o.quick {
		n, rounds = 20, 1
	}
	seq := fmt.Sprintf("for i in range(%d):\n    await tools.echo(i)\nreturn 1", n)
	perCall := func(run func(string) (time.Duration, error)) (time.Duration, error) {
		time.Sleep(refillPause) // a ready child for each run, as bindingRows
		base, err := run("return 1")
		if err != nil {
			return 0, err
		}
		time.Sleep(refillPause)
		s, err := run(seq)
		return (s - base) / time.Duration(n), err
	}
	var goSeq, handSeq samples
	for range rounds {
		g, err := perCall(goRun)
		if err != nil {
			return nil, err
		}
		h, err := perCall(handRun)
		if err != nil {
			return nil, err
		}
		goSeq, handSeq = append(goSeq, g), append(handSeq, h)
	}
	note := "floor = a bare jsonrpc2.Conn on the same stream, interleaved in the same run"
	return []row{
		newRow("Go client: return 1, warm, p50", "ms", ms(handR1.pct(50)), ms(goR1.pct(50)), note),
		newRow(fmt.Sprintf("Go client: sequential binding round trip (%d calls)", n), "µs", us(handSeq.pct(50)), us(goSeq.pct(50)), note),
	}, nil
}
