package session

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// ---- interpreter --------------------------------------------------------------

var (
	pythonOnce sync.Once
	pythonPath string
	pythonErr  error
)

// realPython resolves python3 (a pyenv shim) to the real interpreter binary.
func realPython(t testing.TB) string {
	t.Helper()
	pythonOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "python3", "-c", "import sys;print(sys.executable)").Output()
		if err != nil {
			pythonErr = err
			return
		}
		pythonPath = strings.TrimSpace(string(out))
	})
	if pythonErr != nil || pythonPath == "" {
		t.Skipf("python3 not available: %v", pythonErr)
	}
	return pythonPath
}

// ---- fake client ----------------------------------------------------------------

// behaviour answers one binding/call: the catalogue's client behaviours.
type behaviour func(args []byte) (a Answer, delay time.Duration, hang bool)

func echo() behaviour {
	return func(args []byte) (Answer, time.Duration, bool) {
		return Answer{HasResult: true, Result: args}, 0, false
	}
}

func wrap() behaviour {
	return func(args []byte) (Answer, time.Duration, bool) {
		return Answer{HasResult: true, Result: []byte(`{"echoed":` + string(args) + `}`)}, 0, false
	}
}

func fail(msg string) behaviour {
	return func([]byte) (Answer, time.Duration, bool) {
		return Answer{HasError: true, Message: &msg}, 0, false
	}
}

// failRaw: an error whose message is not a string.
func failRaw() behaviour {
	return func([]byte) (Answer, time.Duration, bool) { return Answer{HasError: true}, 0, false }
}

func constV(v string) behaviour {
	return func([]byte) (Answer, time.Duration, bool) {
		return Answer{HasResult: true, Result: []byte(v)}, 0, false
	}
}

func late(ms int, v string) behaviour {
	return func([]byte) (Answer, time.Duration, bool) {
		return Answer{HasResult: true, Result: []byte(v)}, time.Duration(ms) * time.Millisecond, false
	}
}

func hang() behaviour {
	return func([]byte) (Answer, time.Duration, bool) { return Answer{}, 0, true }
}

// lenOf answers the length of the string or array in args (or args[field]).
func lenOf(field string) behaviour {
	return func(args []byte) (Answer, time.Duration, bool) {
		var v any
		if err := json.Unmarshal(args, &v); err != nil {
			return Answer{HasResult: true, Result: []byte(`-1`)}, 0, false
		}
		if field != "" {
			v = v.(map[string]any)[field]
		}
		n := -1
		switch x := v.(type) {
		case string:
			n = len([]rune(x))
		case []any:
			n = len(x)
		}
		return Answer{HasResult: true, Result: []byte(strconv.Itoa(n))}, 0, false
	}
}

type fakeCall struct {
	runID, ns, fn string
	args          []byte
}

// fakeClient implements Client with per-function behaviours; it records
// calls, cancellations and log events, and the interleaving of both.
type fakeClient struct {
	b map[string]behaviour

	mu          sync.Mutex
	calls       []fakeCall
	cancelled   int
	unanswered  int
	maxPending  int
	logs        []protocol.LogEvent
	order       []string // "log:<text>" / "call:<fn>"
	afterResult []string // events seen after the result was delivered
	resulted    bool
	timers      sync.WaitGroup
	gate        chan struct{} // closed by the first call to "release"
	gateOnce    sync.Once
}

// gated is a delay meaning "until the program calls release" (C143).
const gated = time.Duration(-1)

func gatedV(v string) behaviour {
	return func([]byte) (Answer, time.Duration, bool) {
		return Answer{HasResult: true, Result: []byte(v)}, gated, false
	}
}

func newFake(b map[string]behaviour) *fakeClient {
	if b == nil {
		b = map[string]behaviour{}
	}
	return &fakeClient{b: b, gate: make(chan struct{})}
}

func (c *fakeClient) CallBinding(runID, ns, fn string, args []byte, answer func(Answer)) func() {
	c.mu.Lock()
	c.calls = append(c.calls, fakeCall{runID, ns, fn, bytes.Clone(args)})
	c.order = append(c.order, "call:"+fn)
	if c.resulted {
		c.afterResult = append(c.afterResult, "call:"+fn)
	}
	c.unanswered++
	c.maxPending = max(c.maxPending, c.unanswered)
	c.mu.Unlock()

	if fn == "release" {
		defer c.gateOnce.Do(func() { close(c.gate) })
	}
	b := c.b[fn]
	if b == nil {
		b = fail("no behaviour for " + fn)
	}
	a, delay, hangs := b(args)
	var once sync.Mutex
	done := false
	finish := func(cancelled bool) bool {
		once.Lock()
		defer once.Unlock()
		if done {
			return false
		}
		done = true
		c.mu.Lock()
		c.unanswered--
		if cancelled {
			c.cancelled++
		}
		c.mu.Unlock()
		return true
	}
	stop := make(chan struct{})
	if !hangs {
		c.timers.Add(1)
		go func() {
			defer c.timers.Done()
			wait := c.gate
			if delay > 0 {
				wait = make(chan struct{})
				tm := time.AfterFunc(delay, func() { close(wait) })
				defer tm.Stop()
			}
			if delay != 0 {
				select {
				case <-wait:
				case <-stop:
					return
				}
			}
			once.Lock() // hold across answer: cancel must not return before it
			defer once.Unlock()
			if done {
				return
			}
			done = true
			c.mu.Lock()
			c.unanswered--
			c.mu.Unlock()
			answer(a)
		}()
	}
	var stopOnce sync.Once
	return func() {
		if finish(true) {
			stopOnce.Do(func() { close(stop) })
		} else {
			// answered (or cancelled) already: still count the $/cancelRequest
			c.mu.Lock()
			c.cancelled++
			c.mu.Unlock()
		}
	}
}

// Flush: the fake delivers at once, nothing is buffered.
func (c *fakeClient) Flush() {}

func (c *fakeClient) Log(runID string, ev protocol.LogEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logs = append(c.logs, ev)
	c.order = append(c.order, "log:"+ev.Text)
	if c.resulted {
		c.afterResult = append(c.afterResult, "log:"+ev.Text)
	}
}

func (c *fakeClient) markResult() {
	c.mu.Lock()
	c.resulted = true
	c.mu.Unlock()
}

func (c *fakeClient) snapshot() (calls []fakeCall, cancelled int, order []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls), c.cancelled, slices.Clone(c.order)
}

// ---- managers -------------------------------------------------------------------

func testLimits() protocol.Limits {
	return protocol.Limits{CPUSeconds: 60, MaxWallMs: 20000, AddressSpaceMb: 512,
		MaxLogBytes: 65536, MaxValueBytes: 32768}
}

// newTestManager builds a Manager over a fresh temp dir; at cleanup it shuts
// the Manager down and fails the test if a run directory is left behind.
// Call leakcheck.Check before it so the leak check runs last.
func newTestManager(t *testing.T, mod func(*Config)) *Manager {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{
		Python:        realPython(t),
		Limits:        testLimits(),
		Grace:         150 * time.Millisecond,
		TempDir:       dir,
		MaxConcurrent: 4,
		MaxQueued:     64,
		StartMode:     StartFork, // the daemon's default in tier process
	}
	if mod != nil {
		mod(&cfg)
	}
	m := NewManager(cfg)
	t.Cleanup(func() {
		watchdog := time.AfterFunc(90*time.Second, func() {
			buf := make([]byte, 8<<20)
			buf = buf[:runtime.Stack(buf, true)]
			panic("Manager.Shutdown hung for 90s in " + t.Name() + "\n" + string(buf))
		})
		m.Shutdown()
		watchdog.Stop()
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			t.Errorf("run directory left behind: %s", filepath.Join(dir, e.Name()))
		}
	})
	return m
}

// check wraps a test with the leak check and a manager.
func check(t *testing.T, mod func(*Config)) *Manager {
	t.Helper()
	leakcheck.Check(t, leakcheck.Timeout(10*time.Second))
	return newTestManager(t, mod)
}

// ---- cases ------------------------------------------------------------------------

// tcase is one scripted run: program + limits + bindings + client + expected result.
type tcase struct {
	name     string
	program  string
	limits   protocol.Limits
	bindings []protocol.Namespace
	client   map[string]behaviour
	stream   bool

	// expectations
	value      string   // exact raw JSON value; "" = no value expected unless anyValue
	anyValue   bool     // a value must be present (checked by check func)
	noValue    bool     // explicitly: success without value
	kind       string   // "" = success
	message    string   // exact message (when set)
	contains   []string // message fragments
	excludes   []string // message must not contain
	budget     string
	exitCode   *int
	signal     string
	excType    string
	line       int64
	logs       []string // exact logs (nil = unchecked; use empty slice for [])
	logsHave   []string // entries that must be present
	maxElapsed time.Duration
	minElapsed time.Duration
	nCalls     int // expected binding/call count; -1 unchecked
	extra      func(t *testing.T, res protocol.Result, fc *fakeClient)
}

func tools(names ...string) []protocol.Namespace {
	return []protocol.Namespace{{Global: "tools", Names: names}}
}

func intp(i int) *int { return &i }

// execute submits c on m and waits for its result.
func execute(t *testing.T, m *Manager, c tcase) (protocol.Result, *fakeClient, time.Duration) {
	t.Helper()
	fc := newFake(c.client)
	ch := make(chan protocol.Result, 1)
	start := time.Now()
	_, err := m.Submit(`"`+c.name+`"`, protocol.RunParams{Program: c.program, Bindings: c.bindings,
		Limits: c.limits, Stream: c.stream}, fc, func(r protocol.Result) { fc.markResult(); ch <- r })
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	select {
	case res := <-ch:
		elapsed := time.Since(start)
		fc.timers.Wait()
		return res, fc, elapsed
	case <-time.After(90 * time.Second):
		t.Fatalf("no result after 90s")
	}
	panic("unreachable")
}

func (c tcase) verify(t *testing.T, res protocol.Result, fc *fakeClient, elapsed time.Duration) {
	t.Helper()
	desc := describe(res)
	if c.kind == "" {
		if res.Error != nil {
			t.Fatalf("want success, got %s", desc)
		}
	} else {
		if res.Error == nil || res.Error.Kind != c.kind {
			t.Fatalf("want kind %s, got %s", c.kind, desc)
		}
		e := res.Error
		if c.message != "" && e.Message != c.message {
			t.Errorf("message = %q, want %q", e.Message, c.message)
		}
		for _, s := range c.contains {
			if !strings.Contains(e.Message, s) {
				t.Errorf("message %q does not contain %q", e.Message, s)
			}
		}
		for _, s := range c.excludes {
			if strings.Contains(e.Message, s) {
				t.Errorf("message %q contains %q", e.Message, s)
			}
		}
		if e.Budget != c.budget {
			t.Errorf("budget = %q, want %q", e.Budget, c.budget)
		}
		if c.exitCode != nil && (e.ExitCode == nil || *e.ExitCode != *c.exitCode) {
			t.Errorf("exitCode = %v, want %d", e.ExitCode, *c.exitCode)
		}
		if c.exitCode == nil && e.ExitCode != nil {
			t.Errorf("unexpected exitCode %d", *e.ExitCode)
		}
		if e.Signal != c.signal {
			t.Errorf("signal = %q, want %q", e.Signal, c.signal)
		}
		if c.excType != "" && (e.ExceptionType == nil || *e.ExceptionType != c.excType) {
			t.Errorf("exceptionType = %v, want %q", e.ExceptionType, c.excType)
		}
		if c.line != 0 && (e.Line == nil || *e.Line != c.line) {
			t.Errorf("line = %v, want %d", e.Line, c.line)
		}
		if res.Value != nil {
			t.Errorf("failure carries a value %s", res.Value)
		}
	}
	switch {
	case c.value != "":
		if string(res.Value) != c.value {
			t.Errorf("value = %s, want %s", trim(res.Value), trim([]byte(c.value)))
		}
	case c.noValue:
		if res.Value != nil {
			t.Errorf("want no value, got %s", trim(res.Value))
		}
	case c.anyValue:
		if res.Value == nil {
			t.Errorf("want a value")
		}
	}
	if c.logs != nil && !slices.Equal(res.Logs, c.logs) {
		t.Errorf("logs = %q, want %q", trimLogs(res.Logs), trimLogs(c.logs))
	}
	for _, l := range c.logsHave {
		if !slices.Contains(res.Logs, l) {
			t.Errorf("logs %q lack %q", trimLogs(res.Logs), l)
		}
	}
	if res.Logs == nil {
		t.Errorf("logs is nil, want a (possibly empty) array")
	}
	if c.maxElapsed > 0 && elapsed > c.maxElapsed {
		t.Errorf("elapsed %v > %v", elapsed, c.maxElapsed)
	}
	if c.minElapsed > 0 && elapsed < c.minElapsed {
		t.Errorf("elapsed %v < %v", elapsed, c.minElapsed)
	}
	calls, _, _ := fc.snapshot()
	if c.nCalls >= 0 && len(calls) != c.nCalls {
		t.Errorf("client saw %d binding calls, want %d", len(calls), c.nCalls)
	}
	if c.nCalls >= 0 && res.Stats.BindingCalls != int64(len(calls)) {
		t.Errorf("stats.bindingCalls = %d, client saw %d", res.Stats.BindingCalls, len(calls))
	}
	if c.extra != nil {
		c.extra(t, res, fc)
	}
}

func describe(r protocol.Result) string {
	if r.Error == nil {
		return "ok " + trim(r.Value) + " logs=" + strings.Join(trimLogs(r.Logs), "|")
	}
	e := r.Error
	return e.Kind + " «" + trim([]byte(e.Message)) + "» budget=" + e.Budget + " signal=" + e.Signal +
		" logs=" + strings.Join(trimLogs(r.Logs), "|")
}

func trim(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…(" + strconv.Itoa(len(b)) + " bytes)"
	}
	return string(b)
}

func trimLogs(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = trim([]byte(s))
	}
	if len(out) > 40 {
		out = append(out[:40], "…"+strconv.Itoa(len(l))+" entries")
	}
	return out
}

// runCases runs a table: each case in a parallel subtest sharing one
// manager; the leak check runs after the whole table.
func runCases(t *testing.T, mod func(*Config), cases []tcase) {
	m := check(t, mod)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, fc, elapsed := execute(t, m, c)
			c.verify(t, res, fc, elapsed)
		})
	}
}

// recv waits for one value, failing the test after a minute (a hung test
// would otherwise only end at the package timeout).
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("nothing received after 60s")
	}
	panic("unreachable")
}
