package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// msg is one message from the daemon, decoded loosely (the test trusts it).
type msg struct {
	ID     json.RawMessage `json:"id,omitempty"` // as written ("null" for a null id); nil when absent
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
	raw    []byte          // exactly as received
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
		Path          *string `json:"path"`
		Hint          *string `json:"hint"`
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

// behaviour answers one binding/call (TEST-CATALOGUE.md conventions): it returns
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

// event is one message the client saw, in order.
type event struct {
	m *msg
}

// daemon is a running coderun-rpc and the test's client of it: a thin layer
// over rpcConn that records every message, answers binding/call by
// behaviour and turns failures into test failures.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lockedBuffer
	conn   *rpcConn

	mu       sync.Mutex
	events   []event
	onCall   map[string]behaviour // by function name; default echo
	onLog    func(p json.RawMessage)
	exited   chan struct{}
	exitCode int
	gate     *gate // pauses reading the daemon's stdout (a client that stops reading)
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

// start launches a daemon with env added; it is shut down at cleanup.
func start(t *testing.T, env map[string]string) *daemon {
	t.Helper()
	cmd := exec.Command(daemonBin)
	if _, ok := env[nsLimitVar]; ok {
		cmd = launchUnderNamespaceLimit(t)
	}
	cmd.Env = environ(t, env)
	cmd.Dir = env[workDir]
	if bin, ok := env[asNobody]; ok {
		cmd.Path, cmd.Args[0] = bin, bin
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	d := &daemon{t: t, cmd: cmd, stderr: &lockedBuffer{}, onCall: map[string]behaviour{}, exited: make(chan struct{}),
		gate: newGate()}
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
	d.conn = newConn(d.stdin, 1001)
	d.conn.onMessage, d.conn.onRequest, d.conn.onNote = d.record, d.called, d.notified
	d.conn.start(gatedReader{d.gate, out})
	go d.reap()
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

// reap waits, once the daemon's stdout has ended, for its exit.
func (d *daemon) reap() {
	<-d.conn.Done()
	if err := d.conn.Err(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		d.t.Errorf("the daemon wrote a malformed message: %v", err)
	}
	d.cmd.Wait()
	d.exitCode = d.cmd.ProcessState.ExitCode()
	close(d.exited)
}

// record keeps every message, in order (on the read goroutine).
func (d *daemon) record(m *msg) {
	d.mu.Lock()
	d.events = append(d.events, event{m})
	d.mu.Unlock()
}

// called answers a binding/call off the read goroutine (behaviours sleep
// or never answer); other requests go unanswered.
func (d *daemon) called(m *msg) {
	if m.Method == "binding/call" {
		go d.answer(m)
	}
}

func (d *daemon) notified(m *msg) {
	if m.Method != "run/log" {
		return
	}
	d.mu.Lock()
	f := d.onLog
	d.mu.Unlock()
	if f != nil {
		f(m.Params)
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
		d.conn.reply(m, tail)
	}
}

func (d *daemon) behave(function string, b behaviour) {
	d.mu.Lock()
	d.onCall[function] = b
	d.mu.Unlock()
}

// writeRaw writes bytes to the daemon's stdin as they are.
func (d *daemon) writeRaw(b []byte) { d.conn.WriteRaw(b) }

func (d *daemon) send(body string) { d.conn.Send([]byte(body)) }

// request sends a request (ids from 1001 up) and returns its id text.
func (d *daemon) request(method, params string) string {
	id, _ := d.conn.Request(method, json.RawMessage(params))
	return id
}

func (d *daemon) requestBody(id, method, params string) string {
	return string(rawBody(id, method, json.RawMessage(params)))
}

func (d *daemon) notify(method, params string) { d.conn.Notify(method, json.RawMessage(params)) }

// wait returns the response with id (JSON text).
func (d *daemon) wait(id string) *msg {
	d.t.Helper()
	return d.waitFor(id, 60*time.Second)
}

func (d *daemon) waitFor(id string, timeout time.Duration) *msg {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	m, err := d.conn.Wait(ctx, id)
	if err == nil {
		return m
	}
	if errors.Is(err, errClosed) {
		select {
		case <-d.exited:
			d.t.Fatalf("daemon exited (code %d) while waiting for %s; stderr:\n%s", d.exitCode, id, d.stderr)
		case <-ctx.Done():
		}
	}
	d.t.Fatalf("no response %s within %v (%v); stderr:\n%s", id, timeout, err, d.stderr)
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
