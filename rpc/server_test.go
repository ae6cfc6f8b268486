package rpc

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// fakeRunner records submitted runs; tests settle them by hand.
type fakeRunner struct {
	mu       sync.Mutex
	runs     map[string]*fakeRun
	submits  chan *fakeRun
	full     atomic.Bool
	shutdown chan struct{}
	once     sync.Once
}

type fakeRun struct {
	id       string
	p        protocol.RunParams
	c        session.Client
	onResult func(protocol.Result)
	cancels  chan struct{}
}

func (r *fakeRun) Cancel() {
	select {
	case r.cancels <- struct{}{}:
	default:
	}
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{runs: map[string]*fakeRun{}, submits: make(chan *fakeRun, 100), shutdown: make(chan struct{})}
}

func (f *fakeRunner) Submit(id string, p protocol.RunParams, c session.Client, on func(protocol.Result)) (wire.Canceler, error) {
	if f.full.Load() {
		return nil, session.ErrQueueFull
	}
	r := &fakeRun{id: id, p: p, c: c, onResult: on, cancels: make(chan struct{}, 10)}
	f.mu.Lock()
	f.runs[id] = r
	f.mu.Unlock()
	f.submits <- r
	return r, nil
}

func (f *fakeRunner) QueueFull() bool { return f.full.Load() }

func (f *fakeRunner) Shutdown() {
	f.once.Do(func() { close(f.shutdown) })
	f.mu.Lock()
	runs := f.runs
	f.runs = map[string]*fakeRun{}
	f.mu.Unlock()
	for _, r := range runs {
		r.onResult(protocol.Result{Logs: []string{}, Error: &protocol.RunError{Kind: "abort", Message: protocol.MsgShuttingDown}})
	}
}

func testDaemon() Daemon {
	return Daemon{Python: "/usr/bin/python3", PythonVersion: "3.11.7",
		Limits:  protocol.Limits{CPUSeconds: 60, MaxWallMs: 600000, AddressSpaceMb: 512, MaxLogBytes: 65536, MaxValueBytes: 32768},
		GraceMs: 3000, MaxConcurrentRuns: 4, Isolation: "process",
		IsolationReason: "CODERUN_ISOLATION=process"}
}

type harness struct {
	t      *testing.T
	w      *io.PipeWriter
	writes chan []byte // one writer goroutine keeps the order of sends
	r      *frameReader
	runner *fakeRunner
	code   chan int
	served chan struct{}
	closed sync.Once
}

// closeInput ends the daemon's stdin after every queued write.
func (h *harness) closeInput() { h.closed.Do(func() { close(h.writes) }) }

func start(t *testing.T) *harness {
	t.Helper()
	leakcheck.Check(t) // registered first: runs after the harness is torn down
	srvIn, w := io.Pipe()
	r, srvOut := io.Pipe()
	h := &harness{t: t, w: w, r: newFrameReader(r), runner: newFakeRunner(), code: make(chan int, 1), served: make(chan struct{}),
		writes: make(chan []byte, 1000)}
	go func() {
		for b := range h.writes {
			w.Write(b)
		}
		w.Close()
	}()
	srv := New(Options{In: srvIn, Out: srvOut, Daemon: testDaemon(), Runner: h.runner, Version: "test"})
	go func() {
		code := srv.Serve(context.Background())
		srvOut.Close()
		h.code <- code
		close(h.served)
	}()
	t.Cleanup(func() {
		h.closeInput()
		r.Close() // unblocks any write nobody reads
		select {
		case <-h.served:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after stdin closed")
		}
	})
	return h
}

func (h *harness) raw(s string) {
	h.t.Helper()
	h.writes <- []byte(s)
}

func (h *harness) send(body string) {
	h.t.Helper()
	h.raw(fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body))
}

func (h *harness) recv() string {
	h.t.Helper()
	type res struct {
		b   []byte
		err error
	}
	c := make(chan res, 1)
	go func() { b, err := h.r.next(); c <- res{b, err} }()
	select {
	case x := <-c:
		if x.err != nil {
			h.t.Fatalf("recv: %v", x.err)
		}
		return string(x.b)
	case <-time.After(5 * time.Second):
		h.t.Fatal("recv: timeout")
	}
	return ""
}

func (h *harness) expect(want string) {
	h.t.Helper()
	if got := h.recv(); got != want {
		h.t.Errorf("\n got %s\nwant %s", got, want)
	}
}

func (h *harness) init() {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	if got := h.recv(); !strings.Contains(got, `"serverInfo":{"name":"coderun-rpc","version":"test"}`) {
		h.t.Fatalf("initialize: %s", got)
	}
}

func errResp(id string, code int, msg string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, code, quote(msg))
}

func nullErr(code int, msg string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":%s}}`, code, quote(msg))
}

func TestInitializeResult(t *testing.T) {
	h := start(t)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"result":{"serverInfo":{"name":"coderun-rpc","version":"test"},"capabilities":{"languages":["python"],"isolation":"process","isolationReason":"CODERUN_ISOLATION=process","logStreaming":true,"limits":{"cpuSeconds":60,"maxWallMs":600000,"addressSpaceMb":512,"maxLogBytes":65536,"maxValueBytes":32768,"graceMs":3000,"maxConcurrentRuns":4},"python":{"executable":"/usr/bin/python3","version":"3.11.7","preload":[]},"sessions":{"max":0,"idleTimeoutMs":0,"fork":false}}}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"initialize"}`)
	h.expect(errResp("2", -32600, "server is already initialized"))
}

func TestLifecycle(t *testing.T) {
	h := start(t)
	h.send(`{"jsonrpc":"2.0","method":"initialized"}`) // dropped before initialize
	h.send(`{"jsonrpc":"2.0","id":"a","method":"run","params":{"program":"return 1"}}`)
	h.expect(errResp(`"a"`, -32002, "server not initialized"))
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":[]}`)
	h.expect(errResp("1", -32602, "params must be an object"))
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":null}`)
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":2,"method":"nope"}`)
	h.expect(errResp("2", -32601, "method not found: nope"))
	h.send(`{"jsonrpc":"2.0","id":3,"method":"exit"}`) // notification method with an id
	h.expect(errResp("3", -32601, "method not found: exit"))
	h.send(`{"jsonrpc":"2.0","method":"run","params":{"program":"return 1"}}`) // request without id: ignored
	h.send(`{"jsonrpc":"2.0","id":4,"method":"shutdown"}`)
	h.expect(`{"jsonrpc":"2.0","id":4,"result":null}`)
	h.send(`{"jsonrpc":"2.0","id":5,"method":"run","params":{"program":"return 1"}}`)
	h.expect(errResp("5", -32600, "server is shutting down"))
	h.send(`{"jsonrpc":"2.0","id":6,"method":"initialized"}`)
	h.expect(errResp("6", -32600, "server is shutting down"))
	h.send(`{"jsonrpc":"2.0","method":"exit"}`)
	if code := <-h.code; code != 0 {
		t.Errorf("exit after shutdown: code %d", code)
	}
	if len(h.runner.submits) != 0 {
		t.Error("a run was submitted")
	}
}

func TestExitWithoutShutdown(t *testing.T) {
	h := start(t)
	h.send(`{"jsonrpc":"2.0","method":"exit"}`)
	if code := <-h.code; code != 1 {
		t.Errorf("code %d", code)
	}
}

func TestBeforeInitialize(t *testing.T) {
	h := start(t)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"shutdown"}`)
	h.expect(errResp("1", -32002, "server not initialized"))
	h.send(`{"jsonrpc":"2.0","id":2,"method":"$/cancelRequest","params":{"id":1}}`)
	h.expect(errResp("2", -32002, "server not initialized"))
}

func TestMalformed(t *testing.T) {
	h := start(t)
	h.init()
	for _, c := range []struct{ body, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":`, nullErr(-32700, "parse error: the message body is not valid JSON")},
		{``, nullErr(-32700, "parse error: the message body is not valid JSON")},
		{`{"a":1} x`, nullErr(-32700, "parse error: the message body is not valid JSON")},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"run\",\"params\":{\"program\":\"\xff\"}}", nullErr(-32700, "parse error: the message body is not valid UTF-8")},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, nullErr(-32600, "invalid request: not a JSON-RPC request or response object")},
		{`42`, nullErr(-32600, "invalid request: not a JSON-RPC request or response object")},
		{`{"jsonrpc":"2.0","id":7}`, errResp("7", -32600, "invalid request: no method, result or error member")},
		{`{"jsonrpc":"2.0","id":7,"method":5}`, errResp("7", -32600, "invalid request: method must be a string")},
		{`{"jsonrpc":"2.0","id":-1,"method":5}`, nullErr(-32600, "invalid request: method must be a string")},
		{`{"jsonrpc":"2.0","id":-1,"method":"run"}`, nullErr(-32600, "unsupported request id")},
		{`{"jsonrpc":"2.0","id":1.5,"method":"run"}`, nullErr(-32600, "unsupported request id")},
		{`{"jsonrpc":"2.0","id":1e3,"method":"run"}`, nullErr(-32600, "unsupported request id")},
		{`{"jsonrpc":"2.0","id":null,"method":"run"}`, nullErr(-32600, "unsupported request id")},
		{`{"jsonrpc":"2.0","id":{},"method":"run"}`, nullErr(-32600, "unsupported request id")},
		{`{"jsonrpc":"2.0","id":9223372036854775808,"method":"run"}`, nullErr(-32600, "unsupported request id")},
		{`{"jsonrpc":"2.0","id":9223372036854775807,"method":"x"}`, errResp("9223372036854775807", -32601, "method not found: x")},
		{`{"jsonrpc":"2.0","id":"\ud800","method":"x"}`, `{"jsonrpc":"2.0","id":"\ud800","error":{"code":-32601,"message":"method not found: x"}}`},
		{`{"jsonrpc":"2.0","id":99,"result":1}`, ""}, // matches nothing: ignored
	} {
		h.send(c.body)
		if c.want == "" {
			continue
		}
		h.expect(c.want)
	}
	// Deep nesting in params is fine (no 10 000-level limit).
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	h.send(`{"jsonrpc":"2.0","id":8,"method":"run","params":` + deep + `}`)
	h.expect(errResp("8", -32602, "params must be an object"))
	// Oversized body: answered (id null, the length without its leading
	// zeros) before its bytes are sent, discarded, and serving continues.
	h.raw("Content-Length: 0067108865\r\n\r\n")
	h.expect(nullErr(-32600, "message body of 67108865 bytes exceeds the 67108864-byte limit"))
	h.writes <- make([]byte, 67108865)
	h.send(`{"jsonrpc":"2.0","id":9,"method":"x"}`)
	h.expect(errResp("9", -32601, "method not found: x"))
	// Headers: case-insensitive name, Content-Type ignored, spaces around the value.
	body := `{"jsonrpc":"2.0","id":10,"method":"x"}`
	h.raw(fmt.Sprintf("content-type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-LENGTH:  %d \r\nX-Other: 1\r\n\r\n%s", len(body), body))
	h.expect(errResp("10", -32601, "method not found: x"))
	// A length beyond int64 is answered at once too (the rest of the stream
	// is its body).
	h.raw("Content-Length: 99999999999999999999999\r\n\r\n")
	h.expect(nullErr(-32600, "message body of 99999999999999999999999 bytes exceeds the 67108864-byte limit"))
}

func TestHeaderFaults(t *testing.T) {
	for _, c := range []struct{ raw, fault string }{
		{"Content-Length: 5\n\r\n", `header line does not end in \r\n`},
		{"Content-Type: x\r\n\r\n", "missing Content-Length header"},
		{"Content-Length: -5\r\n\r\n", `Content-Length value "-5" is not a decimal number`},
		{"Content-Length: 0x10\r\n\r\n", `Content-Length value "0x10" is not a decimal number`},
		{"X: " + strings.Repeat("a", 4100) + "\r\n", "header block exceeds 4096 bytes"},
	} {
		h := start(t)
		h.raw(c.raw)
		h.expect(nullErr(-32700, "unusable header block: "+c.fault))
		select {
		case code := <-h.code:
			if code != 1 {
				t.Errorf("%q: exit code %d", c.raw, code)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q: no exit", c.raw)
		}
	}
}

func TestEOFMidMessage(t *testing.T) {
	h := start(t)
	h.raw("Content-Length: 100\r\n\r\n{\"a\"")
	time.Sleep(50 * time.Millisecond)
	h.closeInput()
	if code := <-h.code; code != 0 {
		t.Errorf("code %d", code)
	}
}

func runReq(id, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"run","params":` + params + `}`
}

func (h *harness) submitted() *fakeRun {
	h.t.Helper()
	select {
	case r := <-h.runner.submits:
		return r
	case <-time.After(5 * time.Second):
		h.t.Fatal("no run submitted")
	}
	return nil
}

func TestRunLifecycle(t *testing.T) {
	h := start(t)
	h.init()
	h.send(runReq("1", `{"program":"x = 1","stream":true,"bindings":[{"global":"tools","functions":["a","b"],"errorClass":{"name":"ToolError","memberNameProperty":"tool"}}],"limits":{"maxWallMs":1e3,"cpuSeconds":5.0}}`))
	r := h.submitted()
	if r.id != "1" || r.p.Program != "x = 1" || !r.p.Stream || r.p.Limits.MaxWallMs != 1000 || r.p.Limits.CPUSeconds != 5 ||
		len(r.p.Bindings) != 1 || r.p.Bindings[0].ErrorClass.Name != "ToolError" || len(r.p.Bindings[0].Names) != 2 {
		t.Fatalf("params %+v", r.p)
	}
	// The same id while the run is live.
	h.send(runReq("1", `{"program":""}`))
	h.expect(errResp("1", -32600, "request id is already in use"))
	// A log and a binding call, in order; each delivery is flushed, as
	// session does after every burst.
	rc := r.c.(*runClient)
	flushed := func(deliver func()) { deliver(); rc.Flush() }
	go flushed(func() { r.c.Log("1", protocol.LogEvent{Index: 0, Text: "hi\xed\xa0\x80", Continued: false}) })
	h.expect(`{"jsonrpc":"2.0","method":"run/log","params":{"runId":1,"index":0,"text":"hi\ud800","continued":false}}`)
	answers := make(chan session.Answer, 4)
	cancel := inBackground(func() func() {
		defer rc.Flush()
		return r.c.CallBinding("1", "tools", "a", []byte(`{"q":"<&>"}`), func(a session.Answer) { answers <- a })
	})
	h.expect(`{"jsonrpc":"2.0","id":1,"method":"binding/call","params":{"runId":1,"namespace":"tools","function":"a","args":{"q":"<&>"}}}`)
	deep := strings.Repeat("[", 12000) + strings.Repeat("]", 12000)
	h.send(`{"jsonrpc":"2.0","id":1,"result":` + deep + `}`)
	a := <-answers
	if !a.HasResult || string(a.Result) != deep || a.HasError {
		t.Errorf("answer %+v", a.HasResult)
	}
	(<-cancel)() // already answered: no $/cancelRequest
	// A lossy result with invalid UTF-8 reaches the session undecoded.
	go flushed(func() { r.c.CallBinding("1", "tools", "b", []byte(`null`), func(a session.Answer) { answers <- a }) })
	h.recv()
	h.send("{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":\"\xff\"}")
	if a := <-answers; string(a.Result) != "\"\xff\"" {
		t.Errorf("lossy result %q", a.Result)
	}
	// An error answer.
	go flushed(func() { r.c.CallBinding("1", "tools", "a", []byte(`1`), func(a session.Answer) { answers <- a }) })
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"bad \ud800"}}`)
	if a := <-answers; !a.HasError || a.Message == nil || *a.Message != "bad \xed\xa0\x80" {
		t.Errorf("error answer %+v", a)
	}
	// An answer with neither result nor error still answers its call, and
	// is no −32600 (the next expect would see one).
	go flushed(func() { r.c.CallBinding("1", "tools", "a", []byte(`1`), func(a session.Answer) { answers <- a }) })
	h.recv()
	h.send(`{"jsonrpc":"2.0","id":4}`)
	if a := <-answers; a.HasError || a.HasResult {
		t.Errorf("empty answer %+v", a)
	}
	// A call cancelled while outstanding gets $/cancelRequest; its late answer is dropped.
	cancel = inBackground(func() func() {
		defer rc.Flush()
		return r.c.CallBinding("1", "tools", "a", []byte(`1`), func(a session.Answer) { t.Error("answered after cancel") })
	})
	h.recv()
	go flushed(<-cancel)
	h.expect(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":5}}`)
	h.send(`{"jsonrpc":"2.0","id":5,"result":1}`)
	// Cancel the run, then settle it.
	h.send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`)
	select {
	case <-r.cancels:
	case <-time.After(5 * time.Second):
		t.Fatal("cancel not delivered")
	}
	line := int64(3)
	go r.onResult(protocol.Result{Value: []byte(`{"a":1}`), Logs: []string{"x", "\"q\""},
		Error: &protocol.RunError{Kind: "exception", Message: "m", Line: &line}, Stats: protocol.Stats{WallMs: 5}})
	h.expect(`{"jsonrpc":"2.0","id":1,"result":{"logs":["x","\"q\""],"error":{"kind":"exception","message":"m","line":3},"stats":{"wallMs":5,"cpuMs":0,"maxRssKb":0,"queueMs":0,"bindingCalls":0,"logBytes":0}}}`)
	r.onResult(protocol.Result{}) // a second result is dropped
	h.send(runReq("1", `{"program":"return 1"}`))
	r2 := h.submitted()
	go r2.onResult(protocol.Result{Value: []byte("1"), Logs: []string{}})
	h.expect(`{"jsonrpc":"2.0","id":1,"result":{"value":1,"logs":[],"stats":{"wallMs":0,"cpuMs":0,"maxRssKb":0,"queueMs":0,"bindingCalls":0,"logBytes":0}}}`)
	// Non-stream runs send no run/log.
	h.send(runReq(`"s"`, `{"program":"","stream":false}`))
	r3 := h.submitted()
	r3.c.Log(`"s"`, protocol.LogEvent{Text: "x"})
	go r3.onResult(protocol.Result{Value: []byte("null")})
	h.expect(`{"jsonrpc":"2.0","id":"s","result":{"value":null,"logs":[],"stats":{"wallMs":0,"cpuMs":0,"maxRssKb":0,"queueMs":0,"bindingCalls":0,"logBytes":0}}}`)
}

func TestQueueFull(t *testing.T) {
	h := start(t)
	h.init()
	h.runner.full.Store(true)
	h.send(runReq("1", `{"program":""}`))
	h.expect(errResp("1", -32001, "run queue is full"))
	h.send(runReq("2", `{"program":7}`)) // checked before params validation
	h.expect(errResp("2", -32001, "run queue is full"))
}

// C26 shape: shutdown aborts live runs; their results precede the null.
func TestShutdownAbortsRuns(t *testing.T) {
	h := start(t)
	h.init()
	h.send(runReq("1", `{"program":""}`))
	h.submitted()
	h.send(`{"jsonrpc":"2.0","id":2,"method":"shutdown"}`)
	if got := h.recv(); !strings.Contains(got, `"id":1,"result":{"logs":[],"error":{"kind":"abort","message":"server is shutting down"}`) {
		t.Errorf("run result: %s", got)
	}
	h.expect(`{"jsonrpc":"2.0","id":2,"result":null}`)
	h.closeInput()
	if code := <-h.code; code != 0 {
		t.Errorf("EOF after shutdown: %d", code)
	}
}

func TestCancelIgnored(t *testing.T) {
	h := start(t)
	h.init()
	for _, p := range []string{`{"id":999999}`, `{"id":"nope"}`, `{"id":{"x":1}}`, `{}`, `null`, `[1]`} {
		h.send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":` + p + `}`)
	}
	h.send(`{"jsonrpc":"2.0","id":1,"method":"x"}`)
	h.expect(errResp("1", -32601, "method not found: x"))
}

// inBackground runs f in a goroutine (writes block until the test reads them).
func inBackground(f func() func()) chan func() {
	c := make(chan func(), 1)
	go func() { c <- f() }()
	return c
}

// A cancel after shutdown in arrival order does not turn the shutdown abort
// into a client cancel.
func TestCancelAfterShutdownIgnored(t *testing.T) {
	h := start(t)
	h.init()
	h.send(runReq("1", `{"program":""}`))
	r := h.submitted()
	h.send(`{"jsonrpc":"2.0","id":2,"method":"shutdown"}`)
	h.send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`)
	if got := h.recv(); !strings.Contains(got, `"message":"server is shutting down"`) {
		t.Errorf("run result %s", got)
	}
	h.expect(`{"jsonrpc":"2.0","id":2,"result":null}`)
	if len(r.cancels) != 0 {
		t.Error("the run was cancelled after shutdown")
	}
}
