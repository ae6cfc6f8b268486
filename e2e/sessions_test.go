package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// Persistent sessions (docs/protocol-sessions.md §11) against the built daemon.

// sessionRun is a session run's result: runResult plus its session member.
type sessionRun struct {
	runResult
	Session *struct {
		ID     string `json:"id"`
		Alive  bool   `json:"alive"`
		Runs   int64  `json:"runs"`
		Reason string `json:"reason"`
	} `json:"session"`
}

// sessionErrData is −32004's data.
type sessionErrData struct {
	SessionID string `json:"sessionId"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
}

// open opens a session and returns its id.
func (d *daemon) open(params string) string {
	d.t.Helper()
	m := d.call("session/open", params)
	if m.Error != nil {
		d.t.Fatalf("session/open: %+v; stderr:\n%s", m.Error, d.stderr)
	}
	var r struct{ SessionID string }
	if err := json.Unmarshal(m.Result, &r); err != nil || r.SessionID == "" {
		d.t.Fatalf("session/open result %s", m.Result)
	}
	return r.SessionID
}

// srun runs program in session sid (extra members as for prog) and decodes
// the result.
func (d *daemon) srun(sid, program string, extra ...string) sessionRun {
	d.t.Helper()
	return d.sresult(d.call("run", prog(program, append(extra, `"sessionId":`+strconv.Quote(sid))...)))
}

func (d *daemon) sresult(m *msg) sessionRun {
	d.t.Helper()
	if m.Error != nil {
		d.t.Fatalf("session run answered with error %+v; stderr:\n%s", m.Error, d.stderr)
	}
	var r sessionRun
	if err := json.Unmarshal(m.Result, &r); err != nil || r.Session == nil {
		d.t.Fatalf("session run result %s: %v", m.Result, err)
	}
	return r
}

// expectSessionErr checks an error response: code, and for −32004 the state
// (and reason when given).
func expectSessionErr(t *testing.T, m *msg, code int, state, reason string) {
	t.Helper()
	if m.Error == nil || m.Error.Code != code {
		t.Fatalf("got %s, want error %d", m.raw, code)
	}
	if code != -32004 {
		return
	}
	var data sessionErrData
	if err := json.Unmarshal(m.Error.Data, &data); err != nil || data.State != state ||
		reason != "" && data.Reason != reason {
		t.Errorf("−32004 data %s, want state %q reason %q", m.Error.Data, state, reason)
	}
}

// closedNote waits for session/closed of sid and returns its reason and message.
func (d *daemon) closedNote(sid string, timeout time.Duration) (reason, message string) {
	d.t.Helper()
	m := d.waitEvent(func(m *msg) bool {
		return m.Method == "session/closed" && strings.Contains(string(m.Params), strconv.Quote(sid))
	}, timeout)
	var p struct{ SessionID, Reason, Message string }
	json.Unmarshal(m.Params, &p)
	return p.Reason, p.Message
}

// countClosed counts the session/closed notifications received so far.
func (d *daemon) countClosed() int {
	n := 0
	for _, e := range d.snapshot() {
		if e.m.Method == "session/closed" {
			n++
		}
	}
	return n
}

func TestSessionC300StateKeptAndOutcomes(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{}`)
	if r := d.srun(sid, "x = 41\nimport math\ndef f(v):\n    return v + 1\nclass K: pass\nfor i in range(3): pass\nreturn f(x)"); string(r.Value) != "42" || !r.Session.Alive || r.Session.Runs != 1 || r.Session.ID != sid {
		t.Fatalf("first run %+v session %+v", r.runResult, r.Session)
	}
	r := d.srun(sid, "return [x, math.floor(2.5), f(1), K.__name__, i]")
	if compact(r.Value) != `[41,2,2,"K",2]` || r.Session.Runs != 2 {
		t.Errorf("second run sees %s runs %d", r.Value, r.Session.Runs)
	}
	// exception, invalid-output and the value's output-limit keep the session
	r = d.srun(sid, "y = 1\nraise ValueError('boom')")
	if r.Error == nil || r.Error.Kind != "exception" || !r.Session.Alive {
		t.Errorf("exception: %+v %+v", r.Error, r.Session)
	}
	r = d.srun(sid, "return 'v' * 100", `"limits":{"maxValueBytes":16}`)
	if r.Error == nil || r.Error.Kind != "output-limit" || !r.Session.Alive {
		t.Errorf("output-limit: %+v %+v", r.Error, r.Session)
	}
	r = d.srun(sid, "return 2**53 + 1")
	if r.Error == nil || r.Error.Kind != "invalid-output" || !r.Session.Alive {
		t.Errorf("invalid-output: %+v %+v", r.Error, r.Session)
	}
	r = d.srun(sid, "del x\nreturn [y, 'x' in globals()]")
	if compact(r.Value) != `[1,false]` || r.Session.Runs != 6 {
		t.Errorf("del: %s runs %d", r.Value, r.Session.Runs)
	}
	// a wall timeout ends it: result first, then session/closed lost, then −32004 lost
	r = d.srun(sid, "while True: pass", `"limits":{"maxWallMs":300}`)
	if r.Error == nil || r.Error.Budget != "wall" || r.Session.Alive || r.Session.Reason == "" || r.Session.Runs != 7 {
		t.Errorf("timeout: %+v %+v", r.Error, r.Session)
	}
	if reason, _ := d.closedNote(sid, 10*time.Second); reason != "lost" {
		t.Errorf("session/closed reason %q, want lost", reason)
	}
	expectSessionErr(t, d.call("run", prog("return 1", `"sessionId":"`+sid+`"`)), -32004, "lost", r.Session.Reason)
}

func TestSessionC301CPUBudgetPerRun(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{}`)
	// two runs of ~0.6 s CPU each under a 1 s budget: the budget is per run
	spin := "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\nreturn 1"
	for i := 0; i < 2; i++ {
		if r := d.srun(sid, spin, `"limits":{"cpuSeconds":1}`); r.Error != nil || r.Stats.CPUMs < 500 || r.Stats.CPUMs > 2000 {
			t.Fatalf("run %d: %+v cpuMs %d", i, r.Error, r.Stats.CPUMs)
		}
	}
	// a program that raises its own soft limit is still stopped by the daemon's sampling
	r := d.srun(sid, "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)) if False else None\n"+
		"s, h = resource.getrlimit(resource.RLIMIT_CPU)\nresource.setrlimit(resource.RLIMIT_CPU, (h, h))\nwhile True: pass",
		`"limits":{"cpuSeconds":1}`)
	if r.Error == nil || r.Error.Kind != "timeout" || r.Error.Budget != "cpu" || r.Session.Alive {
		t.Errorf("raised soft limit: %+v %+v", r.Error, r.Session)
	}
}

func TestSessionC302Validation(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_SESSION_IDLE_MS": "60000"})
	for _, c := range []struct{ method, params, msg string }{
		{"session/open", `[]`, "params must be an object"},
		{"session/open", `{"idleTimeoutMs":0}`, "idleTimeoutMs must be a positive integer"},
		{"session/open", `{"idleTimeoutMs":1.5}`, "idleTimeoutMs must be a positive integer"},
		{"session/open", `{"idleTimeoutMs":60001}`, "idleTimeoutMs must not exceed the daemon's configured 60000"},
		{"session/open", `{"limits":{"cpuSeconds":-1}}`, "limits.cpuSeconds must be a positive integer"},
		{"session/close", `{}`, "sessionId must be a string"},
		{"session/fork", `{"sessionId":7}`, "sessionId must be a string"},
		{"run", prog("return 1", `"sessionId":5`), "sessionId must be a string"},
		{"run", prog("return 1", `"sessionId":"session-1"`, `"limits":{"addressSpaceMb":256}`),
			"limits.addressSpaceMb is fixed for the session's lifetime"},
	} {
		m := d.call(c.method, c.params)
		if m.Error == nil || m.Error.Code != -32602 || !strings.HasPrefix(m.Error.Message, c.msg) {
			t.Errorf("%s %s: %s, want −32602 %q", c.method, c.params, m.raw, c.msg)
		}
	}
	expectSessionErr(t, d.call("run", prog("return 1", `"sessionId":"nope"`)), -32004, "unknown", "")
	expectSessionErr(t, d.call("session/close", `{"sessionId":"nope"}`), -32004, "unknown", "")
	expectSessionErr(t, d.call("session/fork", `{"sessionId":"nope"}`), -32004, "unknown", "")
	sid := d.open(`{"idleTimeoutMs":60000}`)
	if m := d.call("session/close", `{"sessionId":"`+sid+`"}`); m.Error != nil || string(m.Result) != "null" {
		t.Fatalf("close: %s", m.raw)
	}
	expectSessionErr(t, d.call("session/close", `{"sessionId":"`+sid+`"}`), -32004, "closed", "closed")
	expectSessionErr(t, d.call("run", prog("return 1", `"sessionId":"`+sid+`"`)), -32004, "closed", "closed")
	if n := d.countClosed(); n != 0 {
		t.Errorf("%d session/closed notifications for an explicit close", n)
	}
}

func TestSessionC303Disabled(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_MAX_SESSIONS": "0"})
	for _, method := range []string{"session/open", "session/fork", "session/close"} {
		if m := d.call(method, `{"sessionId":"x"}`); m.Error == nil || m.Error.Code != -32601 {
			t.Errorf("%s: %s, want −32601", method, m.raw)
		}
	}
	expectSessionErr(t, d.call("run", prog("return 1", `"sessionId":"x"`)), -32004, "unknown", "")
}

func TestSessionC304Cap(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_MAX_SESSIONS": "2"})
	a := d.open(`{}`)
	d.open(`{}`)
	m := d.call("session/open", `{}`)
	expectSessionErr(t, m, -32003, "", "")
	if !strings.Contains(m.Error.Message, "CODERUN_MAX_SESSIONS") {
		t.Errorf("cap message %q does not name the cap", m.Error.Message)
	}
	expectSessionErr(t, d.call("session/fork", `{"sessionId":"`+a+`"}`), -32003, "", "")
	d.call("session/close", `{"sessionId":"`+a+`"}`)
	d.open(`{}`) // a closed session frees its place
}

func TestSessionC305IdleTimeout(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{"idleTimeoutMs":300}`)
	d.srun(sid, "return 1")
	if reason, _ := d.closedNote(sid, 10*time.Second); reason != "idle" {
		t.Errorf("reason %q, want idle", reason)
	}
	expectSessionErr(t, d.call("run", prog("return 1", `"sessionId":"`+sid+`"`)), -32004, "closed", "idle")
}

// TestSessionC306KilledBetweenRuns: a session child killed from outside is
// noticed at once (session/closed lost), later runs get −32004 lost and the
// daemon serves on.
func TestSessionC306KilledBetweenRuns(t *testing.T) {
	onlyInTier(t, "process") // it kills the pid the program reports, which a PID namespace hides
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{}`)
	r := d.srun(sid, "import os\nreturn os.getpid()")
	pid, _ := strconv.Atoi(string(r.Value))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if reason, msg := d.closedNote(sid, 10*time.Second); reason != "lost" || !strings.Contains(msg, "SIGKILL") {
		t.Errorf("session/closed %q %q", reason, msg)
	}
	expectSessionErr(t, d.call("run", prog("return 1", `"sessionId":"`+sid+`"`)), -32004, "lost", "")
	expectOK(t, d.run(prog("return 2")), "2")
}

// TestSessionC307QueueAndCancel: runs on one session are FIFO; cancelling a
// queued one settles it abort and keeps the session; cancelling the live
// one ends it.
func TestSessionC307QueueAndCancel(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{}`)
	in := `"sessionId":"` + sid + `"`
	live := d.request("run", prog("import time\ntime.sleep(0.5)\nn = 1\nreturn n", in))
	queued := d.request("run", prog("return 'never'", in))
	third := d.request("run", prog("n += 1\nreturn n", in))
	d.notify("$/cancelRequest", `{"id":`+queued+`}`)
	q := d.sresult(d.wait(queued))
	if q.Error == nil || q.Error.Kind != "abort" || !q.Session.Alive {
		t.Errorf("cancelled queued run: %+v %+v", q.Error, q.Session)
	}
	if r := d.sresult(d.wait(live)); string(r.Value) != "1" {
		t.Errorf("live run: %s %+v", r.Value, r.Error)
	}
	if r := d.sresult(d.wait(third)); string(r.Value) != "2" || r.Stats.QueueMs < 300 {
		t.Errorf("third run: %s queueMs %d", r.Value, r.Stats.QueueMs)
	}
	// Cancel once the program runs in the child (its streamed line), not
	// after a fixed pause: a cancel that lands while the run still waits
	// for the session aborts it as queued, leaving the session alive.
	running := d.request("run", prog("import time\nprint('live', flush=True)\ntime.sleep(30)", in, `"stream":true`))
	d.waitEvent(func(m *msg) bool {
		return m.Method == "run/log" && strings.Contains(string(m.Params), `"runId":`+running+`,`)
	}, 30*time.Second)
	d.notify("$/cancelRequest", `{"id":`+running+`}`)
	r := d.sresult(d.wait(running))
	if r.Error == nil || r.Error.Kind != "abort" || r.Session.Alive {
		t.Errorf("cancelled live run: %+v %+v", r.Error, r.Session)
	}
	if reason, _ := d.closedNote(sid, 10*time.Second); reason != "lost" {
		t.Errorf("reason %q", reason)
	}
}

// TestSessionC308CloseAbortsRuns: session/close aborts the live and queued runs
// ("session closed") and answers once the child and its descendants are
// gone, a grandchild the program forked included.
func TestSessionC308CloseAbortsRuns(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{}`)
	in := `"sessionId":"` + sid + `"`
	r := d.srun(sid, "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\nreturn os.getcwd()")
	var dir string
	if err := json.Unmarshal(r.Value, &dir); err != nil || r.Error != nil || !r.Session.Alive {
		t.Fatalf("fork run: %s %+v", r.Value, r.Error)
	}
	live := d.request("run", prog("import time\ntime.sleep(30)", in))
	queued := d.request("run", prog("return 1", in))
	time.Sleep(200 * time.Millisecond)
	if m := d.call("session/close", `{"sessionId":"`+sid+`"}`); m.Error != nil {
		t.Fatalf("close: %s", m.raw)
	}
	for _, id := range []string{live, queued} {
		r := d.sresult(d.wait(id))
		if r.Error == nil || r.Error.Kind != "abort" || r.Error.Message != "session closed" || r.Session.Alive {
			t.Errorf("run %s: %+v %+v", id, r.Error, r.Session)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the session's directory %s is still there after close (%v)", dir, err)
	}
}

// TestSessionC309Shutdown: shutdown with open sessions and runs queued on them:
// every session/closed "shutdown" comes before shutdown's null, no run
// directory is left.
func TestSessionC309Shutdown(t *testing.T) {
	leakcheck.Check(t)
	tmp := t.TempDir()
	d := started(t, map[string]string{"TMPDIR": tmp})
	var sids []string
	for i := 0; i < 3; i++ {
		sids = append(sids, d.open(`{}`))
	}
	in := `"sessionId":"` + sids[0] + `"`
	live := d.request("run", prog("import time\ntime.sleep(30)", in))
	queued := d.request("run", prog("return 1", in))
	time.Sleep(200 * time.Millisecond)
	shut := d.request("shutdown", "null")
	d.wait(shut)
	seen := 0
	for _, e := range d.snapshot() {
		if e.m.Method == "session/closed" && strings.Contains(string(e.m.Params), `"reason":"shutdown"`) {
			seen++
		}
		if string(e.m.ID) == shut {
			break
		}
	}
	if seen != 3 {
		t.Errorf("%d session/closed shutdown before shutdown's response, want 3", seen)
	}
	for _, id := range []string{live, queued} {
		if r := d.sresult(d.wait(id)); r.Error == nil || r.Error.Kind != "abort" {
			t.Errorf("run %s: %+v", id, r.Error)
		}
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR after shutdown: %v", ents)
	}
}

// TestSessionC310StdinEOF: stdin closed with 16 open sessions: the daemon exits
// promptly, leaving no child and no run directory.
func TestSessionC310StdinEOF(t *testing.T) {
	leakcheck.Check(t)
	tmp := t.TempDir()
	d := started(t, map[string]string{"TMPDIR": tmp})
	for i := 0; i < 16; i++ {
		d.srun(d.open(`{}`), "x = 1")
	}
	d.stdin.Close()
	if code := d.waitExit(20 * time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
	matches, _ := filepath.Glob(filepath.Join(tmp, "coderun-*"))
	if len(matches) != 0 {
		t.Errorf("run directories left: %v", matches)
	}
}

// TestSessionC311BindingsPerRun: each run's bindings are installed for that run;
// a proxy kept from an earlier run raises RuntimeError; a program that
// rebinds print or deletes a binding global does not break the next run.
func TestSessionC311BindingsPerRun(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{}`)
	b := `"bindings":[{"global":"host","functions":["echo"]}]`
	if r := d.srun(sid, "kept = host.echo\nreturn await host.echo(1)", b); r.Error != nil {
		t.Fatalf("first: %+v", r.Error)
	}
	r := d.srun(sid, "try:\n    await kept(2)\nexcept RuntimeError as e:\n    return str(e)", b)
	if !strings.Contains(string(r.Value), "belongs to a finished run") {
		t.Errorf("kept proxy: %s %+v", r.Value, r.Error)
	}
	d.srun(sid, "del host\nprint = None\ndisplay = None", b)
	if r := d.srun(sid, "del print, display\nprint('hi')\nreturn await host.echo(3)", b); r.Error != nil || len(r.Logs) != 1 || !r.Session.Alive {
		t.Errorf("after rebinding: %+v logs %q", r.Error, r.Logs)
	}
}

// fork forks sid and returns the new session's id.
func (d *daemon) fork(sid string) string {
	d.t.Helper()
	m := d.call("session/fork", `{"sessionId":"`+sid+`"}`)
	if m.Error != nil {
		d.t.Fatalf("session/fork: %+v; stderr:\n%s", m.Error, d.stderr)
	}
	var r struct{ SessionID string }
	if err := json.Unmarshal(m.Result, &r); err != nil || r.SessionID == "" || r.SessionID == sid {
		d.t.Fatalf("session/fork result %s", m.Result)
	}
	return r.SessionID
}

// TestSessionC312Fork: a fork starts with the source's state and a copy of
// its working directory, waits for a busy source, and then diverges; closing
// the source leaves the fork running; a lost session cannot be forked.
func TestSessionC312Fork(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	src := d.open(`{}`)
	srcDir := d.srun(src, "import os\ndata = list(range(100000))\nopen('note.txt', 'w').write('hello')\nreturn os.getcwd()").Value
	live := d.request("run", prog("import time\ntime.sleep(0.5)\nlate = 'set before the fork'", `"sessionId":"`+src+`"`))
	f := d.fork(src) // waits for the live run
	if r := d.sresult(d.wait(live)); r.Error != nil {
		t.Fatalf("source run: %+v", r.Error)
	}
	r := d.srun(f, "import os\nreturn [len(data), late, open('note.txt').read(), os.getcwd() != "+string(srcDir)+"]")
	if compact(r.Value) != `[100000,"set before the fork","hello",true]` || !r.Session.Alive || r.Session.ID != f {
		t.Fatalf("fork's first run: %s %+v", r.Value, r.Error)
	}
	d.srun(f, "data.clear()\nopen('note.txt', 'w').write('fork')")
	if r := d.srun(src, "return [len(data), open('note.txt').read()]"); compact(r.Value) != `[100000,"hello"]` {
		t.Errorf("the source sees the fork's changes: %s", r.Value)
	}
	if m := d.call("session/close", `{"sessionId":"`+src+`"}`); m.Error != nil {
		t.Fatal(m.raw)
	}
	if r := d.srun(f, "return [len(data), open('note.txt').read()]"); compact(r.Value) != `[0,"fork"]` {
		t.Errorf("the fork after the source closed: %s %+v", r.Value, r.Error)
	}
	d.srun(f, "while True: pass", `"limits":{"maxWallMs":200}`)
	d.closedNote(f, 10*time.Second)
	expectSessionErr(t, d.call("session/fork", `{"sessionId":"`+f+`"}`), -32004, "lost", "")
}

// TestSessionC316ForkOrder: a fork takes its place in its source's FIFO:
// it sees the runs accepted before it and none accepted after it.
func TestSessionC316ForkOrder(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	src := d.open(`{}`)
	in := `"sessionId":"` + src + `"`
	live := d.request("run", prog("import time\ntime.sleep(0.3)\nseen = ['live']", in))
	before := d.request("run", prog("seen.append('before')", in))
	fork := d.request("session/fork", `{"sessionId":"`+src+`"}`)
	after := d.request("run", prog("seen.append('after')", in))
	for _, id := range []string{live, before, after} {
		if r := d.sresult(d.wait(id)); r.Error != nil {
			t.Fatalf("source run %s: %+v", id, r.Error)
		}
	}
	m := d.wait(fork)
	var f struct{ SessionID string }
	if m.Error != nil || json.Unmarshal(m.Result, &f) != nil || f.SessionID == "" {
		t.Fatalf("session/fork: %s", m.raw)
	}
	if r := d.srun(f.SessionID, "return seen"); compact(r.Value) != `["live","before"]` {
		t.Errorf("the fork sees %s, want the runs queued before it only", r.Value)
	}
	if r := d.srun(src, "return seen"); compact(r.Value) != `["live","before","after"]` {
		t.Errorf("the source sees %s", r.Value)
	}
}

// TestSessionC312ForkNeedsForkServer: with children spawned, session/fork
// is refused (−32603) and initialize says fork: false.
func TestSessionC312ForkNeedsForkServer(t *testing.T) {
	onlyInTier(t, "process") // in tier sandbox the namespace's init adopts forks, in either start mode
	leakcheck.Check(t)
	d := start(t, map[string]string{"CODERUN_START_MODE": "spawn"})
	m := d.call("initialize", `{}`)
	if !strings.Contains(string(m.Result), `"sessions":{"max":16,"idleTimeoutMs":600000,"fork":false}`) {
		t.Errorf("capabilities %s", m.Result)
	}
	sid := d.open(`{}`)
	if m := d.call("session/fork", `{"sessionId":"`+sid+`"}`); m.Error == nil || m.Error.Code != -32603 {
		t.Errorf("fork: %s", m.raw)
	}
	if r := d.srun(sid, "return 1"); !r.Session.Alive {
		t.Errorf("the source after a refused fork: %+v", r.Session)
	}
}

// sandboxEnv is the environment of a daemon in tier sandbox; the test is
// skipped where the kernel lacks a feature of the tier.
func sandboxEnv(t *testing.T) map[string]string {
	env := map[string]string{"CODERUN_ISOLATION": "sandbox"}
	skipWithoutSandbox(t, env)
	return env
}

// TestSessionC314Sandbox: in tier sandbox a session's child lives in the
// run's namespaces (its parent is the namespace's init, no network), keeps
// its state and reports the interpreter's own memory; session/fork is served.
func TestSessionC314Sandbox(t *testing.T) {
	leakcheck.Check(t)
	d := start(t, sandboxEnv(t))
	if m := d.call("initialize", `{}`); !strings.Contains(string(m.Result), `"fork":true}`) {
		t.Errorf("capabilities in tier sandbox: %s", m.Result)
	}
	sid := d.open(`{}`)
	d.srun(sid, "import os, socket\nppid = os.getppid()\ntry:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\n    net = 'reachable'\nexcept OSError:\n    net = 'unreachable'")
	r := d.srun(sid, "return [ppid, net]")
	if compact(r.Value) != `[1,"unreachable"]` || r.Stats.MaxRssKb < 5000 {
		t.Errorf("sandboxed session: %s maxRssKb %d", r.Value, r.Stats.MaxRssKb)
	}
	// the init bounds the session by its lifetime total, not by one run's budget
	spin := "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.7: pass\nreturn ppid"
	for i := 0; i < 3; i++ {
		if r := d.srun(sid, spin, `"limits":{"cpuSeconds":1}`); r.Error != nil || !r.Session.Alive {
			t.Fatalf("spin %d in a sandboxed session: %+v", i, r.Error)
		}
	}
}

// TestSessionC317SandboxForkConfined: in tier sandbox a fork lives in its
// source's namespaces (its parent is the same init), reads its own copy of
// the source's directory, and writes only its own tree: the source's
// directory refuses it. A fork of the fork is confined the same way.
func TestSessionC317SandboxForkConfined(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, sandboxEnv(t))
	sid := d.open(`{}`)
	d.srun(sid, "import os\nppid = os.getppid()")
	srcDir := d.srun(sid, "import os\nopen('mine.txt', 'w').write('source')\nreturn os.getcwd()").Value
	f := d.fork(sid)
	probe := "import os\ntry:\n    open(os.path.join(" + string(srcDir) + ", 'mine.txt'), 'w').write('fork')\n    wrote = 'wrote'\n" +
		"except PermissionError:\n    wrote = 'refused'\nopen('own.txt', 'w').write('ok')\nreturn [os.getppid(), ppid, wrote, open('mine.txt').read(), os.getcwd() != " + string(srcDir) + "]"
	if r := d.srun(f, probe); compact(r.Value) != `[1,1,"refused","source",true]` {
		t.Errorf("the fork in tier sandbox: %s %+v", r.Value, r.Error)
	}
	if r := d.srun(sid, "return open('mine.txt').read()"); compact(r.Value) != `"source"` {
		t.Errorf("the source's file after the fork's write: %s", r.Value)
	}
	fDir := d.srun(f, "import os\nreturn os.getcwd()").Value
	g := d.fork(f)
	if r := d.srun(g, strings.ReplaceAll(probe, string(srcDir), string(fDir))); compact(r.Value) != `[1,1,"refused","source",true]` {
		t.Errorf("a fork of the fork: %s %+v", r.Value, r.Error)
	}
	d.call("session/close", `{"sessionId":"`+sid+`"}`)
	if r := d.srun(g, "return open('own.txt').read()"); compact(r.Value) != `"ok"` || !r.Session.Alive {
		t.Errorf("the fork's fork after the source closed: %s %+v", r.Value, r.Error)
	}
}

// TestSessionC315ChildDiesInRun: a program that kills its own interpreter
// settles worker-exit with session.alive false; session/closed lost follows
// the result; a run queued behind it settles worker-exit naming the loss.
func TestSessionC315ChildDiesInRun(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{}`)
	in := `"sessionId":"` + sid + `"`
	dying := d.request("run", prog("import os, signal, time\ntime.sleep(0.3)\nos.kill(os.getpid(), signal.SIGKILL)", in))
	behind := d.request("run", prog("return 1", in))
	r := d.sresult(d.wait(dying))
	if r.Error == nil || r.Error.Kind != "worker-exit" || r.Session.Alive || !strings.Contains(r.Session.Reason, "SIGKILL") {
		t.Fatalf("dying run: %+v %+v", r.Error, r.Session)
	}
	q := d.sresult(d.wait(behind))
	if q.Error == nil || q.Error.Kind != "worker-exit" || q.Session.Alive || q.Session.Runs != 1 {
		t.Errorf("queued run: %+v %+v", q.Error, q.Session)
	}
	if reason, _ := d.closedNote(sid, 10*time.Second); reason != "lost" {
		t.Errorf("reason %q", reason)
	}
	var resultAt, noteAt int
	for i, e := range d.snapshot() {
		switch {
		case string(e.m.ID) == dying:
			resultAt = i
		case e.m.Method == "session/closed":
			noteAt = i
		}
	}
	if noteAt < resultAt {
		t.Errorf("session/closed (message %d) came before the run's result (message %d)", noteAt, resultAt)
	}
}

// A session run takes files like a fresh run, into the session's directory
// where earlier runs' files stay; out/ is emptied before each run and
// returned after it, and display() works in every run.
func TestSessionFilesAndOutputs(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{}`)
	first := d.call("run", prog("open('out/a.txt', 'w').write('one')\ndisplay('shown')\nreturn open('in.csv').read()",
		`"files":[{"path":"in.csv","text":"a,b\n"}]`, `"sessionId":`+strconv.Quote(sid)))
	if first.Error != nil || !strings.Contains(string(first.Result), `"value":"a,b\n"`) ||
		!strings.Contains(string(first.Result), `"files":[{"path":"out/a.txt","size":3,"base64":"b25l"}]`) ||
		!strings.Contains(string(first.Result), `"outputs":[{"data":{"text/plain":"'shown'"}}]`) {
		t.Fatalf("first run: %s %+v", first.Result, first.Error)
	}
	second := d.call("run", prog("import os\ndisplay('again')\nreturn [open('in.csv').read(), open('more.txt').read(), os.listdir('out')]",
		`"files":[{"path":"more.txt","text":"x"}]`, `"sessionId":`+strconv.Quote(sid)))
	if second.Error != nil || !strings.Contains(string(second.Result), `"value":["a,b\n","x",[]]`) ||
		strings.Contains(string(second.Result), `"files"`) ||
		!strings.Contains(string(second.Result), `"outputs":[{"data":{"text/plain":"'again'"}}]`) {
		t.Errorf("second run: %s %+v", second.Result, second.Error)
	}
}
