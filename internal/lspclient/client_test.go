package lspclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// peer is the in-memory other side of a Client: it reads what the client
// writes and writes what the client reads.
type peer struct {
	t *testing.T
	r io.Reader      // the client's output
	w io.WriteCloser // the client's input
}

func newPair(t *testing.T, opts Options) (*Client, *peer) {
	leakcheck.Check(t)
	clientR, peerW := io.Pipe()
	peerR, clientW := io.Pipe()
	c := New(clientW, clientR, opts)
	t.Cleanup(func() {
		peerW.Close()
		<-c.Done()
		peerR.Close()
	})
	return c, &peer{t: t, r: peerR, w: peerW}
}

func frameOf(body string) string {
	return "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// expect reads the next bytes the client wrote and compares them with want.
func (p *peer) expect(want string) {
	p.t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(p.r, got); err != nil {
		p.t.Fatalf("reading the client's output: %v", err)
	}
	if string(got) != want {
		p.t.Fatalf("client wrote %q, want %q", got, want)
	}
}

func (p *peer) write(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.w, s); err != nil {
		p.t.Fatalf("writing to the client: %v", err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCallRoundTrip(t *testing.T) {
	c, p := newPair(t, Options{})
	type outcome struct {
		m   *Message
		err error
	}
	done := make(chan outcome, 1)
	before := time.Now()
	go func() { m, err := c.Call(ctxT(t), "run", json.RawMessage(`{"a":1}`)); done <- outcome{m, err} }()
	p.expect(frameOf(`{"jsonrpc":"2.0","id":1,"method":"run","params":{"a":1}}`))
	body := ` {"id":1, "jsonrpc":"2.0","result":{"v": 2}}`
	p.write(frameOf(body))
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if string(o.m.Raw) != body || string(o.m.Result) != `{"v": 2}` || o.m.Error != nil {
		t.Errorf("got raw %q result %q error %v", o.m.Raw, o.m.Result, o.m.Error)
	}
	if o.m.At.Before(before) || o.m.At.After(time.Now()) {
		t.Errorf("received at %v, outside the call", o.m.At)
	}
}

func TestResponsesByID(t *testing.T) {
	c, p := newPair(t, Options{FirstID: 100})
	go func() {
		c.Request("a", nil)
		c.Request("b", json.RawMessage(`[]`))
	}()
	p.expect(frameOf(`{"jsonrpc":"2.0","id":100,"method":"a"}`))
	p.expect(frameOf(`{"jsonrpc":"2.0","id":101,"method":"b","params":[]}`))
	p.write(frameOf(`{"jsonrpc":"2.0","id":101,"result":"b"}`) + frameOf(`{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}`) +
		frameOf(`{"jsonrpc":"2.0","id":100,"result":"a"}`))
	for id, want := range map[string]string{"100": `"a"`, "101": `"b"`} {
		m, err := c.Wait(ctxT(t), id)
		if err != nil || string(m.Result) != want {
			t.Errorf("Wait(%s) = %v, %v; want result %s", id, m, err, want)
		}
	}
	if n := c.Unclaimed(); n != 1 {
		t.Errorf("%d unclaimed responses, want 1", n)
	}
	m, err := c.Wait(ctxT(t), `"x"`)
	if err != nil || m.Error == nil || m.Error.Code != -1 || m.Error.Message != "m" {
		t.Errorf(`Wait("x") = %+v, %v`, m, err)
	}
	if n := c.Unclaimed(); n != 0 {
		t.Errorf("%d unclaimed responses after Wait, want 0", n)
	}
}

func TestPeerRequestsAndNotifications(t *testing.T) {
	var mu sync.Mutex
	var seen, notes []string
	record := func(to *[]string) func(*Message) {
		return func(m *Message) { mu.Lock(); *to = append(*to, string(m.Raw)); mu.Unlock() }
	}
	c, p := newPair(t, Options{
		OnMessage:      record(&seen),
		OnNotification: record(&notes),
		OnRequest: func(m *Message, reply Reply) {
			go reply.Result(m.Params) // answered later, off the read goroutine
		},
	})
	note := `{"jsonrpc":"2.0","method":"run/log","params":{"text":"hi"}}`
	call := `{"jsonrpc":"2.0","id":"c1","method":"binding/call","params":[1,2]}`
	p.write(frameOf(note) + frameOf(call))
	p.expect(frameOf(`{"jsonrpc":"2.0","id":"c1","result":[1,2]}`))
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, "|") != note+"|"+call || strings.Join(notes, "|") != note {
		t.Errorf("OnMessage saw %q, OnNotification %q", seen, notes)
	}
	if c.Unclaimed() != 0 {
		t.Error("a request or notification was kept as a response")
	}
}

func TestUnhandledRequest(t *testing.T) {
	_, p := newPair(t, Options{})
	p.write(frameOf(`{"jsonrpc":"2.0","id":5,"method":"binding/call"}`))
	p.expect(frameOf(`{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"method not found"}}`))
}

func TestWritesAsGiven(t *testing.T) {
	c, p := newPair(t, Options{})
	go func() {
		c.WriteRaw([]byte("Content-Length: 3\r\n\r\n{x"))
		c.Send([]byte(`[1`))
		c.Notify("exit", nil)
		c.Notify("$/cancelRequest", json.RawMessage(`{"id":1}`))
	}()
	p.expect("Content-Length: 3\r\n\r\n{x")
	p.expect(frameOf(`[1`))
	p.expect(frameOf(`{"jsonrpc":"2.0","method":"exit"}`))
	p.expect(frameOf(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`))
}

// At the end of the stream every pending waiter fails, a response read
// before the end is still returned, and later waits fail at once.
func TestEndOfStream(t *testing.T) {
	c, p := newPair(t, Options{})
	failed := make(chan error, 1)
	go func() { _, err := c.Wait(context.Background(), "9"); failed <- err }()
	p.write(frameOf(`{"jsonrpc":"2.0","id":8,"result":null}`))
	for c.Unclaimed() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.w.Close()
	if err := <-failed; !errors.Is(err, ErrClosed) || !errors.Is(err, io.EOF) {
		t.Errorf("pending Wait: %v, want ErrClosed and io.EOF", err)
	}
	<-c.Done()
	if err := c.Err(); err != io.EOF {
		t.Errorf("Err() = %v, want io.EOF", err)
	}
	if m, err := c.Wait(context.Background(), "8"); err != nil || string(m.Result) != "null" {
		t.Errorf("response read before the end: %v, %v", m, err)
	}
	if _, err := c.Wait(context.Background(), "10"); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after the end: %v, want ErrClosed", err)
	}
}

func TestWaitContext(t *testing.T) {
	c, p := newPair(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(ctx, "1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v, want the deadline", err)
	}
	p.write(frameOf(`{"jsonrpc":"2.0","id":1,"result":1}`))
	for deadline := time.Now().Add(5 * time.Second); c.Unclaimed() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a response after an abandoned Wait was not kept")
		}
	}
}

func TestReadFailures(t *testing.T) {
	cases := []struct {
		name, input string
		want        error
	}{
		{"not JSON", frameOf(`{"id":`), ErrMalformed},
		{"not an object", frameOf(`[1]`), ErrMalformed},
		{"bad length", "Content-Length: x\r\n\r\n{}", ErrMalformed},
		{"negative length", "Content-Length: -1\r\n\r\n", ErrMalformed},
		{"no length", "Content-Type: a\r\n\r\n{}", ErrMalformed},
		{"no colon", "Content-Length 2\r\n\r\n{}", ErrMalformed},
		{"long header", "X: " + strings.Repeat("a", maxHeaderBytes) + "\r\n", ErrMalformed},
		{"over the bound", "Content-Length: 17\r\n\r\n", ErrMalformed},
		{"cut in the header", "Content-Len", io.ErrUnexpectedEOF},
		{"cut in the body", "Content-Length: 5\r\n\r\n{}", io.ErrUnexpectedEOF},
		{"clean end", frameOf(`{"method":"x"}`), io.EOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, p := newPair(t, Options{MaxBody: 16})
			waiting := make(chan error, 1)
			go func() { _, err := c.Wait(context.Background(), "1"); waiting <- err }()
			p.write(tc.input)
			p.w.Close()
			<-c.Done()
			if err := c.Err(); !errors.Is(err, tc.want) {
				t.Errorf("Err() = %v, want %v", err, tc.want)
			}
			if err := <-waiting; !errors.Is(err, ErrClosed) {
				t.Errorf("the pending Wait: %v, want ErrClosed", err)
			}
		})
	}
}

// Extra headers and any case of the header name are accepted.
func TestHeaderVariants(t *testing.T) {
	c, p := newPair(t, Options{})
	p.write("content-length:2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}")
	p.write("Content-Length: 24\n\n" + `{"id":3,"result":"ok"}  `)
	m, err := c.Wait(ctxT(t), "3")
	if err != nil || string(m.Result) != `"ok"` {
		t.Fatalf("Wait: %v, %v", m, err)
	}
}

// Two clients back to back, one echoing: concurrent calls each get their
// own answer (run with -race).
func TestConcurrentCalls(t *testing.T) {
	leakcheck.Check(t)
	aR, bW := io.Pipe()
	bR, aW := io.Pipe()
	echo := New(bW, bR, Options{OnRequest: func(m *Message, reply Reply) { reply.Result(m.Params) }})
	c := New(aW, aR, Options{})
	defer func() { aW.Close(); <-echo.Done(); bW.Close(); <-c.Done() }()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				params := fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)
				m, err := c.Call(ctxT(t), "echo", json.RawMessage(params))
				if err != nil || string(m.Result) != params {
					t.Errorf("call %s: %v, %v", params, m, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// readFrame leaves the reader at the next frame.
func TestReadFrameSequence(t *testing.T) {
	r := bufio.NewReader(strings.NewReader(frameOf("ab") + frameOf("") + frameOf("c")))
	var got []string
	for {
		b, err := readFrame(r, 16)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	if strings.Join(got, "|") != "ab||c" {
		t.Errorf("frames %q", got)
	}
}
