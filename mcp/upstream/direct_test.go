package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/internal/mcptest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCaps are generous caps for the tests of this package's callers.
var TestCaps = Caps{MaxPages: 64, MaxTools: 1000, MaxStubBytes: 1 << 20, ListTimeout: time.Minute,
	ToolsTTL: time.Hour, MaxResultBytes: 64 << 20}

// TestCallsGoDirect: once the tools are listed, a call on a stdio server is
// made by this package (its id is the connection's), and its result is the
// same as through the SDK.
func TestCallsGoDirect(t *testing.T) {
	leakcheck.Check(t)
	p := NewPool([]Spec{{Key: "s", Global: "s", Command: os.Args[0], Env: mcptest.Env(0, "")}}, "test", nil, TestCaps)
	defer p.Close()
	s := p.Server("s")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Tools(ctx); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	direct := s.sess.direct
	s.mu.Unlock()
	if direct == nil {
		t.Fatal("the stdio session allows no direct calls")
	}
	got, err := s.Call(ctx, "echo", []byte(`{"message":"hi"}`), nil)
	if err != nil || string(got) != `"hi"` {
		t.Fatalf("echo: %s, %v", got, err)
	}
	direct.callMu.Lock()
	defer direct.callMu.Unlock()
	if direct.lastID != 1 {
		t.Fatalf("%d direct calls, want the one just made", direct.lastID)
	}
}

// peer is the server's side of a lineConn: it reads what the connection
// writes and writes what it reads. The SDK's side is a goroutine reading the
// connection into got, as the SDK's reader does.
type peer struct {
	conn *lineConn
	in   *bufio.Reader  // what the connection wrote
	out  *io.PipeWriter // what the connection reads
	got  chan jsonrpc.Message
	done chan error
}

func newPeer(t *testing.T) *peer {
	toConn, fromPeer := io.Pipe()
	toPeer, fromConn := io.Pipe()
	tr := &lineTransport{out: toConn, in: fromConn}
	c, _ := tr.Connect(context.Background())
	p := &peer{conn: c.(*lineConn), in: bufio.NewReader(toPeer), out: fromPeer,
		got: make(chan jsonrpc.Message, 8), done: make(chan error, 1)}
	go func() {
		for {
			msg, err := p.conn.Read(context.Background())
			if err != nil {
				p.done <- err
				return
			}
			p.got <- msg
		}
	}()
	t.Cleanup(func() {
		fromPeer.Close()
		<-p.done
		toPeer.Close()
	})
	return p
}

// read is the next line the connection wrote, decoded.
func (p *peer) read(t *testing.T) map[string]any {
	t.Helper()
	line, err := p.in.ReadBytes('\n')
	var m map[string]any
	if err == nil {
		err = json.Unmarshal(line, &m)
	}
	if err != nil {
		t.Fatalf("the connection wrote %q: %v", line, err)
	}
	return m
}

func (p *peer) write(t *testing.T, line string) {
	t.Helper()
	if _, err := p.out.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
}

type callOutcome struct {
	result json.RawMessage
	err    error
}

func (p *peer) call(ctx context.Context, tool, args string) chan callOutcome {
	ch := make(chan callOutcome, 1)
	go func() {
		r, err := p.conn.callTool(ctx, tool, json.RawMessage(args), NewBudget(1<<20))
		ch <- callOutcome{r, err}
	}()
	return ch
}

// listed is the connection's record of the SDK's tools/list: whether one went
// out, and its "_meta".
func (p *peer) listed() (json.RawMessage, bool) {
	p.conn.callMu.Lock()
	defer p.conn.callMu.Unlock()
	return p.conn.meta, p.conn.hasListed
}

// TestDirectCallWire: the request a direct call writes, the listing's _meta it
// carries, its answer kept from the SDK, a cancelled call's notification and
// late answer, and the end of the connection failing the calls.
func TestDirectCallWire(t *testing.T) {
	leakcheck.Check(t)
	p := newPeer(t)
	ctx := context.Background()
	if _, ok := p.listed(); ok {
		t.Fatal("listed before any tools/list")
	}
	if r := <-p.call(ctx, "early", "{}"); !errors.Is(r.err, errNotListed) {
		t.Fatalf("a call before any tools/list: %v, want errNotListed", r.err)
	}
	list := &jsonrpc.Request{ID: mustID(t, float64(1)), Method: "tools/list", Params: json.RawMessage(`{"_meta":{"k":"v"}}`)}
	go p.conn.Write(ctx, list)
	if m := p.read(t); m["method"] != "tools/list" {
		t.Fatalf("wrote %v", m)
	}
	if meta, ok := p.listed(); !ok || string(meta) != `{"k":"v"}` {
		t.Fatalf("listed: %s, %v", meta, ok)
	}

	first := p.call(ctx, `a"b`, "{\"x\":\n1}")
	req := p.read(t)
	params, _ := req["params"].(map[string]any)
	args, _ := params["arguments"].(map[string]any)
	meta, _ := params["_meta"].(map[string]any)
	if req["id"] != "coderun-1" || req["method"] != "tools/call" || params["name"] != `a"b` || args["x"] != 1.0 || meta["k"] != "v" {
		t.Fatalf("the call wrote %v", req)
	}
	p.write(t, `{"jsonrpc":"2.0","id":"coderun-1","result":{"content":[]}}`)
	if r := <-first; r.err != nil || string(r.result) != `{"content":[]}` {
		t.Fatalf("first call: %s, %v", r.result, r.err)
	}

	cctx, cancel := context.WithCancel(ctx)
	second := p.call(cctx, "slow", "")
	if req := p.read(t); req["id"] != "coderun-2" {
		t.Fatalf("the second call wrote %v", req)
	}
	cancel()
	if r := <-second; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled call: %v", r.err)
	}
	note := p.read(t)
	params, _ = note["params"].(map[string]any)
	if note["method"] != "notifications/cancelled" || params["requestId"] != "coderun-2" {
		t.Fatalf("after the cancel the connection wrote %v", note)
	}
	p.write(t, `{"jsonrpc":"2.0","id":"coderun-2","result":{}}`) // late: dropped
	p.write(t, `{"jsonrpc":"2.0","id":7,"result":{}}`)           // the SDK's
	if msg := <-p.got; msg.(*jsonrpc.Response).ID.Raw() != int64(7) {
		t.Fatalf("the SDK was handed %#v, want only its own response", msg)
	}

	third := p.call(ctx, "pending", "{}")
	p.read(t)
	p.out.Close() // the server's output ends
	if r := <-third; !errors.Is(r.err, mcp.ErrConnectionClosed) {
		t.Fatalf("call pending at the end: %v", r.err)
	}
	if r := <-p.call(ctx, "after", "{}"); !errors.Is(r.err, mcp.ErrConnectionClosed) {
		t.Fatalf("call after the end: %v", r.err)
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
