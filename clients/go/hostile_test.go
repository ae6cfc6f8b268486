package coderun_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	coderun "github.com/coderun-rpc/coderun-rpc/clients/go"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// hostileDaemon is the daemon's end of a pipe pair handed to Attach: the
// test reads what the client sends and writes what it likes.
type hostileDaemon struct {
	in     jsonrpc2.ObjectStream // what the client writes
	out    *io.PipeWriter        // what the client reads
	client io.ReadWriteCloser    // the client's end, for Attach
}

type pipeEnds struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (p pipeEnds) Close() error {
	for _, c := range p.closers {
		_ = c.Close()
	}
	return nil
}

func newHostileDaemon(t *testing.T) *hostileDaemon {
	fromClient, toDaemon := io.Pipe()
	fromDaemon, toClient := io.Pipe()
	h := &hostileDaemon{
		in:     coderun.NewObjectStream(pipeEnds{Reader: fromClient, Writer: io.Discard, closers: []io.Closer{fromClient}}),
		out:    toClient,
		client: pipeEnds{Reader: fromDaemon, Writer: toDaemon, closers: []io.Closer{toDaemon, fromDaemon}},
	}
	t.Cleanup(func() { toClient.Close(); fromClient.Close() })
	return h
}

// next reads the client's next message and returns its id ("" for a
// notification, or once the client has closed its end).
func (h *hostileDaemon) next() string {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if h.in.ReadObject(&m) != nil {
		return ""
	}
	return string(m.ID)
}

// write writes raw bytes to the client; a pipe write waits for the reader.
func (h *hostileDaemon) write(s string) { _, _ = io.WriteString(h.out, s) }

func frameOf(body string) string {
	return "Content-Length: " + itoa(len(body)) + "\r\n\r\n" + body
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// C1090: a daemon whose header never ends (a megabyte without a line end,
// the stream left open) ends the connection once the header passes 4 KiB:
// the pending call fails with ErrConnectionLost (the library's codec read
// the line on without bound, and the call waited for its context).
func TestC1090EndlessHeader(t *testing.T) {
	leakcheck.Check(t)
	h := newHostileDaemon(t)
	go func() {
		h.next() // initialize
		h.write("Content-Length: 2" + strings.Repeat("x", 1<<20))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := coderun.Attach(ctx, h.client, coderun.Options{})
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, coderun.ErrConnectionLost) {
		t.Fatalf("Attach: %v, want ErrConnectionLost", err)
	}
}

// C1091: a frame whose body holds white space after its JSON value (8 KiB
// of it, valid JSON) is read whole: the next frame is read at its own header
// (the library's codec left the rest of the body in the stream and read it
// as a header, ending the connection).
func TestC1091BodyReadWhole(t *testing.T) {
	leakcheck.Check(t)
	h := newHostileDaemon(t)
	go func() {
		h.write(frameOf(`{"jsonrpc":"2.0","id":` + h.next() + `,"result":{"capabilities":{}}}` + strings.Repeat(" ", 8<<10)))
		h.next() // initialized
		h.write(frameOf(`{"jsonrpc":"2.0","id":` + h.next() + `,"result":{"ok":true}}`))
		h.write(frameOf(`{"jsonrpc":"2.0","id":` + h.next() + `,"result":null}`)) // shutdown
		h.next()                                                                  // exit
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := coderun.Attach(ctx, h.client, coderun.Options{})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer c.Close()
	var got json.RawMessage
	if err := c.Call(ctx, "rpc.discover", nil, &got); err != nil || string(got) != `{"ok":true}` {
		t.Fatalf("call after the padded frame: %s %v", got, err)
	}
}

// C1093: a daemon that never answers a cancelled run does not hold Run: once
// the daemon's grace (capabilities.limits.graceMs, here 0) and a margin have
// passed without the abort result, Run returns the context's error (it
// waited for the answer without end).
func TestC1093CancelledRunUnanswered(t *testing.T) {
	leakcheck.Check(t)
	h := newHostileDaemon(t)
	go func() {
		h.write(frameOf(`{"jsonrpc":"2.0","id":` + h.next() + `,"result":{"capabilities":{"limits":{"graceMs":0}}}}`))
		var m json.RawMessage
		for h.in.ReadObject(&m) == nil { // initialized, the run, its cancel, shutdown: none answered
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := coderun.Attach(ctx, h.client, coderun.Options{})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer func() { h.out.Close(); c.Close() }() // the daemon's end of the stream ends the client's shutdown call
	runCtx, stop := context.WithCancel(ctx)
	stop()
	returned := make(chan error, 1)
	go func() {
		_, err := c.Run(runCtx, "return 1", nil)
		returned <- err
	}()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("Run still waits for the answer of a cancelled run the daemon never answers")
	}
}

// C1094: a daemon that floods binding/call for a live run (10 001 calls of
// a function that waits for its withdrawal, none withdrawn) cannot make the
// client hold more than 10 000 of them: the call past the bound is answered
// at once with a rejection (each call started a goroutine of its own
// without bound).
func TestC1094CallsInFlightBounded(t *testing.T) {
	leakcheck.Check(t)
	h := newHostileDaemon(t)
	const bound = 10000
	rejected := make(chan string, 1)
	go func() {
		h.write(frameOf(`{"jsonrpc":"2.0","id":` + h.next() + `,"result":{"capabilities":{}}}`))
		h.next() // initialized
		run := h.next()
		var calls strings.Builder
		for i := range bound + 1 {
			calls.WriteString(frameOf(`{"jsonrpc":"2.0","id":"c` + itoa(i) + `","method":"binding/call","params":{"runId":` + run +
				`,"namespace":"tools","function":"wait","args":null}}`))
		}
		go h.write(calls.String())
		var answer struct {
			ID    string
			Error *struct{ Message string }
		}
		if h.in.ReadObject(&answer) == nil && answer.Error != nil {
			rejected <- answer.ID + ": " + answer.Error.Message
		}
		close(rejected)
		var m json.RawMessage
		for h.in.ReadObject(&m) == nil { // the run's cancel, shutdown
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := coderun.Attach(ctx, h.client, coderun.Options{})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer func() { h.out.Close(); c.Close() }()
	wait := coderun.Untyped("wait", func(ctx context.Context, _ json.RawMessage) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_, _ = c.Run(runCtx, "unused", &coderun.RunOptions{Bindings: []coderun.Binding{{Global: "tools", Functions: []coderun.Function{wait}}}})
	}()
	select {
	case got := <-rejected:
		if !strings.HasPrefix(got, "c10000: ") || !strings.Contains(got, "10000 binding calls") {
			t.Fatalf("first answer %q, want the rejection of c10000", got)
		}
	case <-ctx.Done():
		t.Fatal("no call was refused: every one of 10 001 waits on a goroutine of its own")
	}
}
