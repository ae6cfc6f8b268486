package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/textproto"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// msg is one message from the daemon, decoded loosely (the test trusts it).
type msg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
	raw    []byte
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// runResult is a run response's result.
type runResult struct {
	Value json.RawMessage `json:"value"`
	Logs  []string        `json:"logs"`
	Error *struct {
		Kind          string  `json:"kind"`
		Message       string  `json:"message"`
		ExceptionType *string `json:"exceptionType"`
		Budget        string  `json:"budget"`
	} `json:"error"`
	Stats struct {
		WallMs, CPUMs, MaxRssKb, QueueMs, BindingCalls, LogBytes int64
	} `json:"stats"`
}

type callParams struct {
	RunID     json.RawMessage `json:"runId"`
	Namespace string          `json:"namespace"`
	Function  string          `json:"function"`
	Args      json.RawMessage `json:"args"`
}

// behaviour answers one binding/call (TEST-CATALOGUE conventions): it returns
// the response body's tail (`"result":…` or `"error":…`), or "" to never answer.
type behaviour func(p callParams) string

func echo(p callParams) string { return `"result":` + string(p.Args) }
func wrap(p callParams) string { return `"result":{"echoed":` + string(p.Args) + `}` }
func fail(m string) behaviour {
	return func(callParams) string { return `"error":{"code":-32000,"message":` + strconv.Quote(m) + `}` }
}
func constant(v string) behaviour { return func(callParams) string { return `"result":` + v } }
func late(ms int, v string) behaviour {
	return func(callParams) string { time.Sleep(time.Duration(ms) * time.Millisecond); return `"result":` + v }
}
func hang(callParams) string { return "" }

// event is what the client saw, in order.
type event struct {
	at time.Time
	m  *msg
}

type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lockedBuffer
	wmu    sync.Mutex
	nextID int

	mu        sync.Mutex
	waiters   map[string]chan *msg
	responses map[string]*msg
	events    []event
	onCall    map[string]behaviour // by function name; default echo
	onLog     func(p json.RawMessage)
	exited    chan struct{}
	exitCode  int
	gate      *gate // pauses reading the daemon's stdout (a client that stops reading)
}

// gate blocks reads while closed; open by default.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newGate() *gate { g := &gate{open: make(chan struct{})}; close(g.open); return g }

// pause stops reading; resume starts again.
func (g *gate) pause() { g.mu.Lock(); g.open = make(chan struct{}); g.mu.Unlock() }
func (g *gate) resume() {
	g.mu.Lock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
	g.mu.Unlock()
}

type gatedReader struct {
	g *gate
	r io.Reader
}

func (gr gatedReader) Read(p []byte) (int, error) {
	gr.g.mu.Lock()
	c := gr.g.open
	gr.g.mu.Unlock()
	<-c
	return gr.r.Read(p)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// environ is the test's environment without CODERUN_* variables, plus env.
func environ(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CODERUN_") {
			out = append(out, kv)
		}
	}
	if _, ok := env["CODERUN_PYTHON_BIN"]; !ok && !defaultPython(env) {
		out = append(out, "CODERUN_PYTHON_BIN="+realPython)
	}
	for k, v := range env {
		if k != useDefaultPython && k != workDir {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// workDir in env is the daemon's working directory (not an environment variable).
const workDir = "E2E_DIR"

// useDefaultPython in env leaves CODERUN_PYTHON_BIN unset.
const useDefaultPython = "E2E_DEFAULT_PYTHON"

func defaultPython(env map[string]string) bool { _, ok := env[useDefaultPython]; return ok }

// start launches a daemon with env added; it is shut down at cleanup.
func start(t *testing.T, env map[string]string) *daemon {
	t.Helper()
	cmd := exec.Command(daemonBin)
	cmd.Env = environ(env)
	cmd.Dir = env[workDir]
	d := &daemon{t: t, cmd: cmd, stderr: &lockedBuffer{}, waiters: map[string]chan *msg{},
		responses: map[string]*msg{}, onCall: map[string]behaviour{}, exited: make(chan struct{}), gate: newGate()}
	cmd.Stderr = d.stderr
	var err error
	if d.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go d.readLoop(bufio.NewReader(gatedReader{d.gate, out}))
	t.Cleanup(func() {
		d.gate.resume()
		d.stdin.Close()
		select {
		case <-d.exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-d.exited
			t.Errorf("daemon did not exit after stdin closed; stderr:\n%s", d.stderr)
		}
		if strings.Contains(d.stderr.String(), "DATA RACE") || strings.Contains(d.stderr.String(), "panic") {
			t.Errorf("the daemon reported a data race or a panic:\n%s", d.stderr)
		}
	})
	return d
}

// started is start + initialize.
func started(t *testing.T, env map[string]string) *daemon {
	t.Helper()
	d := start(t, env)
	if m := d.call("initialize", `{"clientInfo":{"name":"e2e"}}`); m.Error != nil {
		t.Fatalf("initialize: %+v; stderr:\n%s", m.Error, d.stderr)
	}
	return d
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	hdr, err := textproto.NewReader(r).ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(hdr.Get("Content-Length"))
	if err != nil {
		return nil, fmt.Errorf("bad Content-Length %q", hdr.Get("Content-Length"))
	}
	body := make([]byte, n)
	_, err = io.ReadFull(r, body)
	return body, err
}

func (d *daemon) readLoop(r *bufio.Reader) {
	defer func() {
		err := d.cmd.Wait()
		d.exitCode = d.cmd.ProcessState.ExitCode()
		_ = err
		close(d.exited)
	}()
	for {
		body, err := readFrame(r)
		if err != nil {
			return
		}
		m := &msg{raw: body}
		if err := json.Unmarshal(body, m); err != nil {
			d.t.Errorf("daemon sent invalid JSON %q: %v", body, err)
			return
		}
		d.mu.Lock()
		d.events = append(d.events, event{time.Now(), m})
		d.mu.Unlock()
		switch {
		case m.Method == "binding/call":
			go d.answer(m)
		case m.Method == "run/log":
			d.mu.Lock()
			f := d.onLog
			d.mu.Unlock()
			if f != nil {
				f(m.Params)
			}
		case m.Method != "":
		default:
			id := string(m.ID)
			d.mu.Lock()
			if c := d.waiters[id]; c != nil {
				delete(d.waiters, id)
				c <- m
			} else {
				d.responses[id] = m
			}
			d.mu.Unlock()
		}
	}
}

func (d *daemon) answer(m *msg) {
	var p callParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		d.t.Errorf("binding/call params %s: %v", m.Params, err)
		return
	}
	d.mu.Lock()
	b := d.onCall[p.Function]
	d.mu.Unlock()
	if b == nil {
		b = echo
	}
	if tail := b(p); tail != "" {
		d.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,` + tail + `}`)
	}
}

func (d *daemon) behave(function string, b behaviour) {
	d.mu.Lock()
	d.onCall[function] = b
	d.mu.Unlock()
}

// writeRaw writes bytes to the daemon's stdin as they are.
func (d *daemon) writeRaw(b []byte) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.stdin.Write(b)
}

func frame(body string) []byte {
	return []byte("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

func (d *daemon) send(body string) { d.writeRaw(frame(body)) }

// request sends a request and returns its id text.
func (d *daemon) request(method, params string) string {
	d.mu.Lock()
	d.nextID++
	id := strconv.Itoa(1000 + d.nextID)
	d.mu.Unlock()
	d.send(d.requestBody(id, method, params))
	return id
}

func (d *daemon) requestBody(id, method, params string) string {
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"`
	if params != "" {
		body += `,"params":` + params
	}
	return body + "}"
}

func (d *daemon) notify(method, params string) {
	d.send(`{"jsonrpc":"2.0","method":"` + method + `","params":` + params + `}`)
}

// wait returns the response with id (JSON text).
func (d *daemon) wait(id string) *msg {
	d.t.Helper()
	return d.waitFor(id, 60*time.Second)
}

func (d *daemon) waitFor(id string, timeout time.Duration) *msg {
	d.t.Helper()
	d.mu.Lock()
	if m := d.responses[id]; m != nil {
		delete(d.responses, id)
		d.mu.Unlock()
		return m
	}
	c := make(chan *msg, 1)
	d.waiters[id] = c
	d.mu.Unlock()
	select {
	case m := <-c:
		return m
	case <-d.exited:
		d.t.Fatalf("daemon exited (code %d) while waiting for %s; stderr:\n%s", d.exitCode, id, d.stderr)
	case <-time.After(timeout):
		d.t.Fatalf("no response %s within %v; stderr:\n%s", id, timeout, d.stderr)
	}
	return nil
}

func (d *daemon) call(method, params string) *msg {
	d.t.Helper()
	return d.wait(d.request(method, params))
}

// result decodes a run response.
func (d *daemon) result(m *msg) runResult {
	d.t.Helper()
	if m.Error != nil {
		d.t.Fatalf("run answered with error %+v", m.Error)
	}
	var r runResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		d.t.Fatalf("run result %s: %v", m.Result, err)
	}
	return r
}

// run sends a run and waits for its result.
func (d *daemon) run(params string) runResult {
	d.t.Helper()
	return d.result(d.call("run", params))
}

func (d *daemon) snapshot() []event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]event(nil), d.events...)
}

// waitEvent waits until some received message satisfies f.
func (d *daemon) waitEvent(f func(*msg) bool, timeout time.Duration) *msg {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, e := range d.snapshot() {
			if f(e.m) {
				return e.m
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.t.Fatalf("event not seen within %v; stderr:\n%s", timeout, d.stderr)
	return nil
}

// waitExit waits for the process to exit and returns its code.
func (d *daemon) waitExit(timeout time.Duration) int {
	d.t.Helper()
	select {
	case <-d.exited:
		return d.exitCode
	case <-time.After(timeout):
		d.t.Fatalf("daemon still running after %v; stderr:\n%s", timeout, d.stderr)
	}
	return -1
}

// prog builds run params from a program and extra members.
func prog(program string, extra ...string) string {
	b, _ := json.Marshal(program)
	s := `{"program":` + string(b)
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

func expectOK(t *testing.T, r runResult, value string) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("run failed: %+v (logs %q)", *r.Error, r.Logs)
	}
	if compact(r.Value) != value {
		t.Fatalf("value %s, want %s", r.Value, value)
	}
}

func expectFailure(t *testing.T, r runResult, kind, message string) {
	t.Helper()
	if r.Error == nil || r.Error.Kind != kind || r.Error.Message != message {
		t.Fatalf("got error %+v value %s, want %s «%s»", r.Error, r.Value, kind, message)
	}
	if r.Value != nil {
		t.Errorf("a failed run carries a value %s", r.Value)
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
