package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// TestGroupF: budgets, termination (TEST-CATALOGUE.md group F) at session level.
func TestGroupF(t *testing.T) {
	cases := []tcase{
		{name: "C110", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 500 }),
			program: "import time\nwhile True:\n    time.sleep(1)", kind: protocol.KindTimeout,
			message: "wall-clock ceiling reached (500ms)", budget: protocol.BudgetWall},
		{name: "C114", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 10000 }), program: "return 1", value: "1"},
		{name: "C115", program: "import os\nos._exit(7)", kind: protocol.KindWorkerExit,
			message: "python exited (code=7, signal=null) before completing", exitCode: intp(7)},
		{name: "C116", program: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", kind: protocol.KindWorkerExit,
			message: "python exited (code=null, signal=SIGKILL) before completing", signal: "SIGKILL"},
		{name: "C116b-sigsegv", program: "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", kind: protocol.KindWorkerExit,
			message: "python exited (code=null, signal=SIGSEGV) before completing", signal: "SIGSEGV"},
		{name: "C117", limits: lim(func(l *protocol.Limits) { l.CPUSeconds = 1; l.MaxWallMs = 30000 }),
			program: `import subprocess, sys
busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2:\n    pass\n"
subprocess.run([sys.executable, "-c", busy])
subprocess.run([sys.executable, "-c", busy])
return "escaped"`, kind: protocol.KindTimeout, budget: protocol.BudgetCPU,
			message: "CPU time exhausted (limit at most 1s; a stricter inherited RLIMIT_CPU can fire sooner)"},
		{name: "C118a", limits: lim(func(l *protocol.Limits) { l.CPUSeconds = 1 }),
			program: "import time\ntime.sleep(1.5)\nreturn \"slept\"", value: `"slept"`},
		{name: "C118b", limits: lim(func(l *protocol.Limits) { l.CPUSeconds = 1 }),
			program: "import subprocess, sys\nsubprocess.run([sys.executable, \"-c\", \"pass\"])\nreturn \"cheap child\"", value: `"cheap child"`},
		{name: "C120", limits: lim(func(l *protocol.Limits) { l.CPUSeconds = 1; l.MaxWallMs = 15000 }),
			program: "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass",
			kind:    protocol.KindTimeout, budget: protocol.BudgetCPU,
			message: "CPU time exhausted (limit at most 1s; a stricter inherited RLIMIT_CPU can fire sooner)"},
		{name: "C120b-sigxcpu", limits: lim(func(l *protocol.Limits) { l.CPUSeconds = 1; l.MaxWallMs = 15000 }),
			program: "while True:\n    pass", kind: protocol.KindTimeout, budget: protocol.BudgetCPU,
			message: "CPU time exhausted (limit at most 1s; a stricter inherited RLIMIT_CPU can fire sooner)"},
		{name: "C121", limits: lim(func(l *protocol.Limits) { l.CPUSeconds = 1; l.MaxWallMs = 15000 }),
			program: `import os, resource, signal, time
signal.signal(signal.SIGXCPU, lambda *a: None)
resource.getrusage = lambda *a: None
os.kill = lambda *a: None
signal.signal = lambda *a: None
start = time.process_time()
while time.process_time() - start < 1.05:
    pass
return "escaped"`, kind: protocol.KindTimeout, budget: protocol.BudgetCPU, noValue: true,
			message: "CPU time exhausted (limit at most 1s; a stricter inherited RLIMIT_CPU can fire sooner)"},
		{name: "C125", program: `import os, subprocess, sys
os.write(1, b"leader-diagnostic-no-newline")
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(4)"], start_new_session=True)
return "escaped"`, value: `"escaped"`, logsHave: []string{"leader-diagnostic-no-newline"},
			minElapsed: 1500 * time.Millisecond, maxElapsed: 4 * time.Second},
		{name: "C126", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 8000 }),
			program: "import sys\ndata = sys.stdin.read()\nreturn \"read: \" + repr(data)", value: `"read: ''"`},
		{name: "C127", program: "def f(x: int):\n    pass\nreturn f.__annotations__[\"x\"].__name__", value: `"int"`},
		// C161 and sigterm-trap-wall pin what the real child does at the wall
		// (the held line admitted; a SIGTERM trapper killed); the wall, grace
		// and close-deadline timing is pinned by TestMachineWallKillCloseDeadline.
		{name: "C161", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 1500 }),
			program: "print(\"before hang\", end=\"\", flush=True)\nwhile True:\n    pass", kind: protocol.KindTimeout,
			budget: protocol.BudgetWall, message: "wall-clock ceiling reached (1500ms)", logs: []string{"before hang"}},
		{name: "sigterm-trap-wall", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 1000 }),
			program: "import signal, time\nsignal.signal(signal.SIGTERM, lambda *a: None)\nprint('trapped', flush=True)\nwhile True:\n    time.sleep(0.01)",
			kind:    protocol.KindTimeout, budget: protocol.BudgetWall, logs: []string{"trapped"}, maxElapsed: 4 * time.Second},
		{name: "stats", program: "import time\ntime.sleep(0.3)\nprint('x')\nreturn 1", value: "1",
			extra: func(t *testing.T, res protocol.Result, _ *fakeClient) {
				s := res.Stats
				if s.WallMs < 300 || s.CPUMs <= 0 || s.MaxRssKb <= 0 || s.LogBytes != 4 || s.QueueMs < 0 {
					t.Errorf("stats = %+v", s)
				}
			}},
	}
	runCases(t, nil, cases)
}

// TestCancelLive: C111 — cancel on the streamed "started" line keeps the logs.
func TestCancelLive(t *testing.T) {
	m := check(t, nil)
	started := make(chan struct{}, 1)
	fc := &streamHook{fakeClient: newFake(nil), on: func(ev protocol.LogEvent) {
		if ev.Text == "started" {
			started <- struct{}{}
		}
	}}
	ch := make(chan protocol.Result, 1)
	r, err := m.Submit("7", protocol.RunParams{Stream: true, Limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 10000 }),
		Program: "import time\nprint(\"started\", flush=True)\nwhile True:\n    time.sleep(0.1)"}, fc,
		func(res protocol.Result) { ch <- res })
	if err != nil {
		t.Fatal(err)
	}
	recv(t, started)
	r.Cancel()
	r.Cancel()
	res := recv(t, ch)
	if res.Error == nil || res.Error.Kind != protocol.KindAbort || res.Error.Message != protocol.MsgCancelled {
		t.Fatalf("got %s", describe(res))
	}
	if len(res.Logs) != 1 || res.Logs[0] != "started" {
		t.Errorf("logs = %q", res.Logs)
	}
	r.Cancel() // after the response: harmless
	// C112: a following run still works.
	res2, fc2, el := execute(t, m, tcase{name: "after", program: "return 1"})
	tcase{value: "1"}.verify(t, res2, fc2, el)
}

type streamHook struct {
	*fakeClient
	on func(protocol.LogEvent)
}

func (s *streamHook) Log(runID string, ev protocol.LogEvent) {
	s.fakeClient.Log(runID, ev)
	s.on(ev)
}

// TestQueue: FIFO order, ErrQueueFull, cancelling a queued run (abort, logs
// [], no spawn), ErrShuttingDown after Shutdown, queued runs aborted by it.
func TestQueue(t *testing.T) {
	m := check(t, func(c *Config) { c.MaxConcurrent = 1; c.MaxQueued = 2 })
	results := make(chan string, 8)
	printed := make(chan struct{}, 4)
	submit := func(name, program string) *Run {
		t.Helper()
		fc := &streamHook{fakeClient: newFake(nil), on: func(protocol.LogEvent) { printed <- struct{}{} }}
		r, err := m.Submit(name, protocol.RunParams{Program: program, Stream: true}, fc, func(res protocol.Result) {
			results <- name + ":" + describe(res) + fmt.Sprintf(" queue=%d wall=%d cpu=%d", res.Stats.QueueMs, res.Stats.WallMs, res.Stats.CPUMs)
		})
		if err != nil {
			t.Fatalf("Submit %s: %v", name, err)
		}
		return r
	}
	live := submit("live", "import time\nprint('live', flush=True)\ntime.sleep(60)")
	q1 := submit("q1", "return 'q1'")
	q2 := submit("q2", "return 'q2'")
	if !m.QueueFull() {
		t.Errorf("QueueFull = false with 1 running and 2 queued (MaxQueued 2)")
	}
	if _, err := m.Submit("q3", protocol.RunParams{Program: "return 1"}, newFake(nil), func(protocol.Result) {}); err != ErrQueueFull {
		t.Fatalf("third queued run: err = %v, want ErrQueueFull", err)
	}
	time.Sleep(50 * time.Millisecond)
	q1.Cancel()
	if m.QueueFull() {
		t.Errorf("QueueFull = true after a queued run left")
	}
	got := recv(t, results)
	if !strings.HasPrefix(got, "q1:abort «run cancelled by the client»") || !strings.Contains(got, "logs= ") && !strings.Contains(got, "logs= queue") {
		t.Errorf("cancelled queued run: %s", got)
	}
	if !strings.Contains(got, "wall=0 cpu=0") || strings.Contains(got, "queue=0 ") {
		t.Errorf("cancelled queued run stats: %s", got)
	}
	_ = q2
	recv(t, printed) // the live run printed
	live.Cancel()
	if got := recv(t, results); !strings.HasPrefix(got, "live:abort «run cancelled by the client»") || !strings.Contains(got, "logs=live") {
		t.Errorf("live run: %s", got)
	}
	if got := recv(t, results); !strings.HasPrefix(got, `q2:ok "q2"`) {
		t.Errorf("q2: %s", got)
	}
	// Shutdown aborts live and queued runs, and refuses new ones.
	submit("live2", "import time\ntime.sleep(60)")
	submit("q4", "return 4")
	m.Shutdown()
	for range 2 {
		got := recv(t, results)
		if !strings.Contains(got, "abort «server is shutting down»") {
			t.Errorf("after shutdown: %s", got)
		}
	}
	if _, err := m.Submit("late", protocol.RunParams{Program: "return 1"}, newFake(nil), func(protocol.Result) {}); err != ErrShuttingDown {
		t.Errorf("Submit after Shutdown: %v", err)
	}
}

// TestShutdownKillsTrapper: C124 — Shutdown returns only after a
// SIGTERM-trapping child is dead.
func TestShutdownKillsTrapper(t *testing.T) {
	m := check(t, func(c *Config) { c.Grace = 400 * time.Millisecond })
	pids := make(chan int, 1)
	fc := newFake(map[string]behaviour{"ready": func(args []byte) (Answer, time.Duration, bool) {
		var pid int
		fmt.Sscanf(string(args), `{"pid":%d}`, &pid)
		pids <- pid
		return Answer{HasResult: true, Result: []byte("null")}, 0, false
	}})
	ch := make(chan protocol.Result, 1)
	_, err := m.Submit("1", protocol.RunParams{Bindings: tools("ready"), Limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 10000 }),
		Program: `import os, signal, time
signal.signal(signal.SIGTERM, lambda *a: None)
await tools.ready({"pid": os.getpid()})
while True:
    time.sleep(0.05)`}, fc, func(r protocol.Result) { ch <- r })
	if err != nil {
		t.Fatal(err)
	}
	pid := recv(t, pids)
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	m.Shutdown()
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("Shutdown took %v, want ≥ 300ms", el)
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("pid %d still exists after Shutdown: %v", pid, err)
	}
	res := recv(t, ch)
	if res.Error == nil || res.Error.Kind != protocol.KindAbort || res.Error.Message != protocol.MsgShuttingDown {
		t.Errorf("result %s", describe(res))
	}
}

// TestShutdownWaitsSurvivor: C128 — Shutdown waits for a same-group
// survivor of a run that already responded.
func TestShutdownWaitsSurvivor(t *testing.T) {
	m := check(t, func(c *Config) { c.Grace = 300 * time.Millisecond })
	hb := filepath.Join(t.TempDir(), "hb")
	res, fc, el := execute(t, m, tcase{name: "C128", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 10000 }),
		program: fmt.Sprintf(`import os, subprocess, sys, time
hb = %q
code = ("import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "hb = sys.argv[1]\n"
        "end = time.time() + 30\n"
        "while time.time() < end:\n"
        "    with open(hb, 'a'):\n"
        "        os.utime(hb)\n"
        "    time.sleep(0.05)\n")
subprocess.Popen([sys.executable, "-c", code, hb], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not os.path.exists(hb):
    time.sleep(0.01)
return "spawned"`, hb)})
	tcase{value: `"spawned"`}.verify(t, res, fc, el)
	m.Shutdown()
	st1, err := os.Stat(hb)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	st2, _ := os.Stat(hb)
	if !st1.ModTime().Equal(st2.ModTime()) {
		t.Errorf("heartbeat still changing after Shutdown")
	}
}

// TestReapDeadline: C129 — with the grace SIGKILL suppressed, a same-group
// survivor that ignores SIGTERM is SIGKILLed by quiescence's reap deadline:
// once the run is quiescent the survivor is dead. When the deadline fires
// is pinned in virtual time (TestAwaitEmpty), and that the hook leaves only
// the close deadline armed too (TestMachineNoGraceKill); here a real
// survivor is killed. The survivor says it ignores SIGTERM before the run
// returns, so the kill escalation always finds it ready.
func TestReapDeadline(t *testing.T) {
	m := check(t, func(c *Config) { c.Grace = 100 * time.Millisecond })
	m.noGraceKill = true
	results := make(chan protocol.Result, 1)
	r, err := m.Submit(`"C129"`, protocol.RunParams{Program: `import subprocess, sys
code = "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nos.write(1, b'r')\ntime.sleep(30)\n"
p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
if p.stdout.read(1) != b"r":
    raise RuntimeError("the survivor did not start")
return p.pid`}, newFake(nil), func(res protocol.Result) { results <- res })
	if err != nil {
		t.Fatal(err)
	}
	res := recv(t, results)
	var pid int
	if res.Error != nil || json.Unmarshal(res.Value, &pid) != nil || pid <= 0 {
		t.Fatalf("want the survivor's pid, got %s", describe(res))
	}
	recv(t, r.quiescent)
	if running(pid) {
		t.Errorf("survivor %d still running once the run is quiescent", pid)
	}
}

// TestSurvivorRecreatesFiles: a same-group survivor that keeps writing into
// the run directory after settlement does not leave it behind (the harness
// fails the test if the temp dir is not empty after Shutdown). The survivor
// says it ignores SIGTERM and has begun writing before the run returns.
func TestSurvivorRecreatesFiles(t *testing.T) {
	m := check(t, func(c *Config) { c.Grace = 200 * time.Millisecond })
	res, fc, el := execute(t, m, tcase{name: "survivor", program: `import subprocess, sys
code = ("import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "end = time.time() + 10\n"
        "i = 0\n"
        "while time.time() < end:\n"
        "    i += 1\n"
        "    try:\n"
        "        os.makedirs('d%d' % (i % 50), exist_ok=True)\n"
        "        open('d%d/f%d' % (i % 50, i), 'w').close()\n"
        "    except OSError:\n"
        "        pass\n"
        "    if i == 1:\n"
        "        os.write(1, b'r')\n")
p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
if p.stdout.read(1) != b"r":
    raise RuntimeError("the survivor did not start")
return "ok"`})
	tcase{value: `"ok"`}.verify(t, res, fc, el)
}

// running reports whether pid exists and is not a zombie: a dead survivor is
// reparented to the machine's init, which may reap it late.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	return len(f) > 0 && string(f[0]) != "Z"
}
