package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
)

// Faults: the daemon SIGKILLed mid-run, stdin closed mid-run, a
// client that stops reading stdout while runs stream, a binding that never
// answers, answers with unknown ids or twice.

// runProcs returns the pids of processes started for runs of a daemon whose
// TMPDIR is tmp: a run's environment is TMPDIR=<its run directory under tmp>
// only, and its descendants inherit it. The daemon itself (TMPDIR=tmp
// exactly) and its fork server are not counted.
func runProcs(tmp string) []int { return slices.DeleteFunc(tmpdirProcs(tmp), isForkServer) }

// tmpdirProcs returns the live processes whose TMPDIR is under tmp: every
// process the daemon whose TMPDIR is tmp started (its fork server, run
// processes, their descendants) but its watchdog (whose environment is empty).
func tmpdirProcs(tmp string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(kv, []byte("TMPDIR="+tmp+"/")) {
				if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !isZombie(st) {
					out = append(out, pid)
				}
				break
			}
		}
	}
	return out
}

func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// runDirs lists the directories a daemon made in tmp, but for the fork
// server's: those in its home there (a coderun- entry with an owner record,
// docs/containment.md §1), and any other coderun- entry.
func runDirs(tmp string) []string {
	var out []string
	for _, top := range dirEntries(tmp) {
		if !strings.HasPrefix(top, "coderun-") {
			continue
		}
		if _, err := os.Lstat(filepath.Join(tmp, top, "owner")); err != nil {
			out = append(out, top)
			continue
		}
		for _, e := range dirEntries(filepath.Join(tmp, top)) {
			if name := filepath.Join(top, e); strings.HasPrefix(e, "coderun-") && !isForkServerDir(tmp, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// waitNoRunProcs polls until no run process is left or the timeout passes;
// it returns the survivors (killed afterwards so they do not leak).
func waitNoRunProcs(tmp string, timeout time.Duration) []int {
	deadline := time.Now().Add(timeout)
	for {
		left := runProcs(tmp)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				syscall.Kill(p, syscall.SIGKILL)
			}
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rssKB is the VmRSS of pid in KiB.
func rssKB(pid int) int { return statusKB(pid, "VmRSS") }

// statusKB is the field (VmRSS, VmHWM) of pid's /proc status in KiB.
func statusKB(pid int, field string) int {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			n, _ := strconv.Atoi(strings.Fields(line)[1])
			return n
		}
	}
	return 0
}

func fdCount(pid int) int {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents)
}

func pidsBehaviour(c chan int) behaviour {
	return func(p callParams) string {
		var n int
		json.Unmarshal(p.Args, &n)
		c <- n
		return `"result":null`
	}
}

// SIGKILL of the daemon mid-run: no cleanup code runs in the daemon, so the
// parent-death signal is all that stands between a crash and orphans. Every
// run process (busy, mid-binding, in a native sleep, a warm child) must be
// gone within a second. (Grandchildren: TestDaemonSIGKILLGrandchild.)
func TestDaemonSIGKILLMidRun(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	d := started(t, map[string]string{"TMPDIR": tmp, "CODERUN_WARM_POOL": "2", "CODERUN_MAX_CONCURRENT_RUNS": "4"})
	pids := make(chan int, 8)
	d.behave("pid", pidsBehaviour(pids))
	d.behave("hang", hang)
	bind := `"bindings":[{"global":"tools","functions":["pid","hang"]}]`
	d.request("run", prog("import os\nawait tools.pid(os.getpid())\nwhile True:\n    pass", bind))
	d.request("run", prog("import os\nawait tools.pid(os.getpid())\nawait tools.hang({})", bind))
	d.request("run", prog("import os, time\nawait tools.pid(os.getpid())\ntime.sleep(600)", bind, `"stream":true`))
	for range 3 {
		select {
		case <-pids:
		case <-time.After(30 * time.Second):
			t.Fatalf("runs did not start; stderr:\n%s", d.stderr)
		}
	}
	before := runProcs(tmp)
	if len(before) < 3 {
		t.Fatalf("found %d run processes, want ≥ 3", len(before))
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.waitExit(5 * time.Second)
	if left := waitNoRunProcs(tmp, time.Second); len(left) > 0 {
		t.Errorf("run processes alive 1 s after the daemon was SIGKILLed: %v (of %v)", left, before)
	}
}

// As above with a grandchild in the run's process group (subprocess.Popen).
// No parent-death signal reaches it (it is not the daemon's child): the
// daemon's watchdog, which outlives it, kills the group (finding F1, fixed)
// and exits. Each must be gone within a second; the poll is longer so that
// only a survivor fails, not a loaded machine. Both start modes: a forked
// run process is the fork server's child, registered all the same.
func TestDaemonSIGKILLGrandchild(t *testing.T) {
	onlyInTier(t, "process") // the program reports its own pids, which tier sandbox namespaces
	for _, mode := range []string{"spawn", "fork"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			daemonSIGKILLGrandchild(t, mode)
		})
	}
}

func daemonSIGKILLGrandchild(t *testing.T, mode string) {
	tmp := t.TempDir()
	d := started(t, map[string]string{"TMPDIR": tmp, "CODERUN_WARM_POOL": "0", "CODERUN_START_MODE": mode})
	pids := make(chan int, 2)
	d.behave("pid", pidsBehaviour(pids))
	d.request("run", prog(`import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
await tools.pid(os.getpid())
await tools.pid(child.pid)
while True:
    pass`, `"bindings":[{"global":"tools","functions":["pid"]}]`))
	procs := map[string]proc{"watchdog": watchdogOf(t, d.cmd.Process.Pid)}
	for _, name := range []string{"run process", "grandchild"} {
		select {
		case p := <-pids:
			procs[name] = procOf(t, p)
		case <-time.After(30 * time.Second):
			t.Fatalf("no pids; stderr:\n%s", d.stderr)
		}
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	d.waitExit(5 * time.Second)
	for name, p := range procs {
		if !p.gone(5 * time.Second) {
			t.Errorf("the %s (pid %d) survived the daemon's SIGKILL (killed by the test)", name, p.pid)
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	if !t.Failed() {
		t.Logf("run process, grandchild and watchdog gone %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))
	}
	waitNoRunProcs(tmp, 0)
}

// proc is one process, told apart from a later one with the same pid by its
// start time.
type proc struct {
	pid   int
	start uint64
}

func procOf(t *testing.T, pid int) proc {
	t.Helper()
	start, ok := child.StartTime(pid)
	if !ok {
		t.Fatalf("process %d is not running", pid)
	}
	return proc{pid, start}
}

// gone polls until p has exited (a zombie counts) or the timeout passes.
func (p proc) gone(timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		if start, ok := child.StartTime(p.pid); !ok || start != p.start || zombie(p.pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// watchdogOf finds the daemon's watchdog: its child with argv[0]
// "coderun-watchdog", started before the daemon serves.
func watchdogOf(t *testing.T, daemon int) proc {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if !bytes.Equal(cmdline, []byte("coderun-watchdog\x00")) {
			continue
		}
		if pid, err := strconv.Atoi(e.Name()); err == nil && ppid(pid) == daemon {
			return procOf(t, pid)
		}
	}
	t.Fatalf("daemon %d has no watchdog process", daemon)
	return proc{}
}

// ppid is field 4 of /proc/<pid>/stat (0 when unreadable).
func ppid(pid int) int {
	st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if i := bytes.LastIndexByte(st, ')'); i >= 0 {
		if f := bytes.Fields(st[i+1:]); len(f) > 1 {
			n, _ := strconv.Atoi(string(f[1]))
			return n
		}
	}
	return 0
}

func zombie(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && isZombie(st)
}

// Stdin closed with runs in every state (queued, mid-binding, streaming,
// looping): exit 0, every run process gone, every run directory removed,
// the watchdog stopped.
func TestStdinClosedMidRuns(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	d := started(t, map[string]string{"TMPDIR": tmp, "CODERUN_GRACE_MS": "200", "CODERUN_MAX_CONCURRENT_RUNS": "3",
		"CODERUN_WARM_POOL": "1"})
	pids := make(chan int, 8)
	d.behave("pid", pidsBehaviour(pids))
	d.behave("hang", hang)
	bind := `"bindings":[{"global":"tools","functions":["pid","hang"]}]`
	d.request("run", prog("import os\nawait tools.pid(os.getpid())\nawait tools.hang({})", bind))
	d.request("run", prog("import os\nawait tools.pid(os.getpid())\nwhile True:\n    print('s' * 200)", bind, `"stream":true`))
	d.request("run", prog("import os, signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nawait tools.pid(os.getpid())\nwhile True:\n    pass", bind))
	d.request("run", prog("return 'queued'"))
	for range 3 {
		select {
		case <-pids:
		case <-time.After(30 * time.Second):
			t.Fatalf("runs did not start; stderr:\n%s", d.stderr)
		}
	}
	watchdog := watchdogOf(t, d.cmd.Process.Pid)
	d.stdin.Close()
	if code := d.waitExit(15 * time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if !watchdog.gone(0) {
		t.Errorf("the watchdog (pid %d) outlived the daemon's orderly exit", watchdog.pid)
		syscall.Kill(watchdog.pid, syscall.SIGKILL)
	}
	if left := waitNoRunProcs(tmp, time.Second); len(left) > 0 {
		t.Errorf("run processes survived the daemon's exit: %v", left)
	}
	if dirs := runDirs(tmp); len(dirs) > 0 {
		t.Errorf("run directories left: %v", dirs)
	}
}

// A client that stops reading stdout while runs stream logs: the daemon's
// memory stays bounded, the runs still end by their budgets (their
// processes are gone while the client is still not reading), and when the
// client resumes every run answers and the daemon serves new runs.
func TestClientStopsReading(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	d := started(t, map[string]string{"TMPDIR": tmp, "CODERUN_GRACE_MS": "200", "CODERUN_MAX_CONCURRENT_RUNS": "4",
		"CODERUN_WARM_POOL": "0", "CODERUN_MAX_LOG_BYTES": "4194304"})
	pid := d.cmd.Process.Pid
	expectOK(t, d.run(prog("return 0")), "0")
	base := rssKB(pid)
	d.gate.pause()
	var ids []string
	for range 3 {
		ids = append(ids, d.request("run", prog("while True:\n    print('z' * 1000)", `"stream":true`, `"limits":{"maxWallMs":2000}`)))
	}
	// A non-streaming run, and one whose logs overflow the ledger.
	quick := d.request("run", prog("return 'quick'"))
	flood := d.request("run", prog("import os\nfor _ in range(100):\n    os.write(1, b'f' * 100000 + b'\\n')\nreturn 'flooded'", `"stream":true`, `"limits":{"maxWallMs":3000}`))
	// While nobody reads: the runs end by their wall clocks (2 s + grace +
	// the close deadline), memory stays bounded.
	time.Sleep(time.Second)
	peak := 0
	deadline := time.Now().Add(12 * time.Second)
	gone := false
	for time.Now().Before(deadline) {
		peak = max(peak, rssKB(pid))
		if len(runProcs(tmp)) == 0 {
			gone = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !gone {
		t.Errorf("run processes %v still alive 13 s into a 2 s wall clock while the client was not reading", runProcs(tmp))
	}
	for range 20 { // a little longer: nothing more may accumulate
		peak = max(peak, rssKB(pid))
		time.Sleep(50 * time.Millisecond)
	}
	// Bound: five runs × 4 MiB ledger each, framed and escaped, plus the
	// race detector's shadow memory; what matters is that it does not grow
	// with the (unbounded) output the programs attempted.
	if grow := peak - base; grow > 400*1024 {
		t.Errorf("daemon RSS grew by %d KiB while the client was not reading (base %d KiB)", grow, base)
	}
	t.Logf("daemon RSS base %d KiB, peak while stalled %d KiB", base, peak)
	d.gate.resume()
	for _, id := range ids {
		r := d.result(d.waitFor(id, 30*time.Second))
		if r.Error == nil || r.Error.Kind != "timeout" || r.Error.Budget != "wall" {
			t.Errorf("run %s: %+v, want timeout/wall", id, r.Error)
		}
		if n := len(merge(d.streamed(id))); n != len(r.Logs) {
			t.Errorf("run %s: %d streamed entries, %d logs", id, n, len(r.Logs))
		}
	}
	expectOK(t, d.result(d.waitFor(quick, 30*time.Second)), `"quick"`)
	// The flood may finish or be held back by the stalled stream (its
	// stdout pipe is drained at the client's pace) and end by its wall clock.
	if r := d.result(d.waitFor(flood, 30*time.Second)); r.Error != nil && (r.Error.Kind != "timeout" || r.Error.Budget != "wall") {
		t.Errorf("flood: %+v, want ok or timeout/wall", r.Error)
	}
	expectOK(t, d.run(prog("return 'after'")), `"after"`)
	if dirs := runDirs(tmp); len(dirs) > 0 {
		t.Errorf("run directories left: %v", dirs)
	}
}

// A binding that never answers: the wall clock ends the run, the client is
// told with $/cancelRequest, and the late answer is ignored (no reply to
// it, no effect on the next run that reuses the machinery).
func TestBindingNeverAnswers(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_GRACE_MS": "200"})
	d.behave("hang", hang)
	id := d.request("run", prog("return await tools.hang({})", `"bindings":[{"global":"tools","functions":["hang"]}]`, `"limits":{"maxWallMs":1000}`))
	call := d.waitEvent(func(m *msg) bool { return m.Method == "binding/call" }, 30*time.Second)
	r := d.result(d.wait(id))
	expectFailure(t, r, "timeout", "wall-clock ceiling reached (1000ms)")
	d.waitEvent(func(m *msg) bool {
		if m.Method != "$/cancelRequest" {
			return false
		}
		var p struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(m.Params, &p)
		return string(p.ID) == string(call.ID)
	}, 10*time.Second)
	n := len(d.snapshot())
	d.send(`{"jsonrpc":"2.0","id":` + string(call.ID) + `,"result":"late"}`)
	d.send(`{"jsonrpc":"2.0","id":` + string(call.ID) + `,"error":{"code":1,"message":"late error"}}`)
	time.Sleep(300 * time.Millisecond)
	if after := d.snapshot(); len(after) != n {
		t.Errorf("the daemon answered a late binding answer: %s", after[n].m.raw)
	}
	expectOK(t, d.run(prog("return await tools.echo(7)", `"bindings":[{"global":"tools","functions":["echo"]}]`)), "7")
}

// A client answering with an unknown id, or twice: ignored, never answered,
// never delivered to a program; the run sees its first answer only.
func TestUnknownAndDuplicateAnswers(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	d.behave("twice", func(p callParams) string { return "" })
	id := d.request("run", prog("a = await tools.twice(1)\nb = await tools.echo(2)\nreturn [a, b]",
		`"bindings":[{"global":"tools","functions":["twice","echo"]}]`))
	call := d.waitEvent(func(m *msg) bool { return m.Method == "binding/call" }, 30*time.Second)
	n := len(d.snapshot())
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":987654321,"result":"unknown"}`,
		`{"jsonrpc":"2.0","id":"no-such-call","result":"unknown"}`,
		`{"jsonrpc":"2.0","id":"no-such-call","error":{"code":-32000,"message":"unknown"}}`,
		`{"jsonrpc":"2.0","id":null,"result":"null id"}`,
	} {
		d.send(body)
	}
	time.Sleep(300 * time.Millisecond)
	if after := d.snapshot(); len(after) != n {
		t.Errorf("the daemon reacted to an answer with an unknown id: %s", after[n].m.raw)
	}
	// Answer twice, the second differently, back to back.
	d.writeRaw(append(frame(`{"jsonrpc":"2.0","id":`+string(call.ID)+`,"result":"first"}`),
		frame(`{"jsonrpc":"2.0","id":`+string(call.ID)+`,"result":"second"}`)...))
	expectOK(t, d.result(d.wait(id)), `["first",2]`)
	for _, e := range d.snapshot() {
		if e.m.Method == "" && e.m.Error != nil {
			t.Errorf("an error was sent: %s", e.m.raw)
		}
	}
	expectOK(t, d.run(prog("return 'still serving'")), `"still serving"`)
}
