package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// A SIGKILLed daemon leaves nothing behind (issue 23): at every point where
// it owns directories, its TMPDIR (a fresh one per case) is empty within 2 s
// and no process of it is left. Its watchdog removes the directories once it
// has killed the groups (child/watchdog, child/rundir); nothing in the daemon
// runs after the SIGKILL.

// crashPoint brings a started daemon whose TMPDIR is tmp to the point where
// the test kills it; outside is a directory a program may link to.
type crashPoint func(t *testing.T, d *daemon, tmp, outside string)

// hostileRun is a run that leaves in its directory what the watchdog must
// cope with (a read-only folder, an unreadable one, links out, a file held
// open, the user's data) and then calls tools.ready.
func hostileRun(outside, tail string) string {
	return prog(fmt.Sprintf(`import os
os.makedirs("ro/closed")
open("ro/closed/data", "w").write("user data")
os.chmod("ro/closed", 0)
os.chmod("ro", 0o500)
os.symlink(%q, "dir-link")
os.symlink(%q, "file-link")
held = open("held-open", "w")
held.write("x" * 100000)
await tools.ready()
%s`, outside, filepath.Join(outside, "secret"), tail), `"bindings":[{"global":"tools","functions":["ready","hang"]}]`, `"stream":true`)
}

// readyAt makes d's tools.ready answer and signal the returned channel.
func readyAt(d *daemon) <-chan struct{} {
	ready := make(chan struct{}, 1)
	d.behave("ready", func(callParams) string {
		select {
		case ready <- struct{}{}:
		default:
		}
		return `"result":null`
	})
	d.behave("hang", hang)
	return ready
}

func await(t *testing.T, d *daemon, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: timed out; stderr:\n%s", what, d.stderr)
	}
}

var crashPoints = []struct {
	name  string
	env   map[string]string
	reach crashPoint
}{
	// Before the first run: the fork server and the warm pool being staged.
	{"start-up", nil, func(t *testing.T, d *daemon, tmp, _ string) {
		waitFor(t, func() bool { return len(dirEntries(tmp)) > 0 }, "a directory")
	}},
	{"warm pool ready", nil, func(t *testing.T, d *daemon, tmp, _ string) {
		d.call("initialize", "{}")
		waitFor(t, func() bool { return len(runDirs(tmp)) == 2 }, "two warm children") // and the fork server's, in fork mode
	}},
	{"mid-run", nil, func(t *testing.T, d *daemon, _, outside string) {
		ready := readyAt(d)
		d.call("initialize", "{}")
		d.request("run", hostileRun(outside, "import time\ntime.sleep(30)"))
		await(t, d, ready, "the run started")
	}},
	{"mid-binding call", nil, func(t *testing.T, d *daemon, _, outside string) {
		readyAt(d)
		d.call("initialize", "{}")
		d.request("run", hostileRun(outside, "await tools.hang()"))
		d.waitEvent(func(m *msg) bool { return m.Method == "binding/call" && bytes.Contains(m.Params, []byte(`"hang"`)) }, 30*time.Second)
	}},
	{"streaming", nil, func(t *testing.T, d *daemon, _, outside string) {
		readyAt(d)
		d.call("initialize", "{}")
		d.request("run", hostileRun(outside, "while True:\n    print('s' * 200)"))
		d.waitEvent(func(m *msg) bool { return m.Method == "run/log" }, 30*time.Second)
	}},
	// A run that ignores SIGTERM holds the teardown for the grace period.
	{"during shutdown", map[string]string{"CODERUN_GRACE_MS": "5000"}, func(t *testing.T, d *daemon, _, outside string) {
		ready := readyAt(d)
		d.call("initialize", "{}")
		d.request("run", hostileRun(outside, "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(30)"))
		await(t, d, ready, "the run started")
		time.Sleep(100 * time.Millisecond) // the answer reaches the child
		d.request("shutdown", "")
		time.Sleep(300 * time.Millisecond) // SIGTERM sent; the grace period runs
	}},
}

// TestDaemonSIGKILLLeavesNoDirectory runs each crash point in both start
// modes and logs how long the TMPDIR took to empty (RELIABILITY.md).
func TestDaemonSIGKILLLeavesNoDirectory(t *testing.T) {
	onlyInTier(t, "process") // the hostile program chmods and links what tier sandbox refuses, and the sandbox probe stages a directory before the watchdog runs
	t.Parallel()
	for _, mode := range []string{"fork", "spawn"} {
		for _, c := range crashPoints {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				env := map[string]string{"CODERUN_WARM_POOL": "2", "CODERUN_START_MODE": mode}
				for k, v := range c.env {
					env[k] = v
				}
				emptied := crashAt(t, env, c.reach)
				t.Logf("TMPDIR empty and every process gone %v after the SIGKILL", emptied.Round(time.Millisecond))
			})
		}
	}
}

// crashAt starts a daemon with a fresh TMPDIR, brings it to reach, SIGKILLs
// it and requires the TMPDIR empty and every process gone within 2 s; it
// returns how long that took.
func crashAt(t *testing.T, env map[string]string, reach crashPoint) time.Duration {
	tmp, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	env["TMPDIR"] = tmp
	d := start(t, env)
	reach(t, d, tmp, outside)
	watchdog := watchdogOf(t, d.cmd.Process.Pid)
	before := dirEntries(tmp)
	d.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	d.waitExit(5 * time.Second)
	var left []string
	var procs []int
	for deadline := killed.Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		left, procs = dirEntries(tmp), tmpdirProcs(tmp)
		if !watchdog.gone(0) {
			procs = append(procs, watchdog.pid)
		}
		if len(left)+len(procs) == 0 || time.Now().After(deadline) {
			break
		}
	}
	emptied := time.Since(killed)
	for _, pid := range procs {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(left) > 0 || len(procs) > 0 {
		t.Errorf("2 s after the SIGKILL: left in TMPDIR %v (of %v), processes %v; daemon stderr:\n%s", left, before, procs, d.stderr)
	}
	if len(before) == 0 {
		t.Errorf("the daemon owned no directory when killed")
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "keep" {
		t.Errorf("a file a run linked to: %q, %v", b, err)
	}
	return emptied
}

// dirEntries lists tmp's entries.
func dirEntries(tmp string) []string {
	ents, _ := os.ReadDir(tmp)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// The start-up sweep: a daemon removes, in the background, the directories
// left in its TMPDIR by daemons that are gone (killed together with their
// watchdog) and logs how many at info; it never touches the directories of
// a live daemon sharing its TMPDIR, nor entries without an owner record.
func TestStartUpSweep(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	env := map[string]string{"TMPDIR": tmp, "CODERUN_WARM_POOL": "1"}
	live := started(t, env)
	waitFor(t, func() bool { return len(heldBy(tmp, live)) >= 2 }, "the first daemon's directories")

	gone := start(t, map[string]string{"TMPDIR": tmp, "CODERUN_WARM_POOL": "1", "CODERUN_START_MODE": "spawn"})
	gone.call("initialize", "{}")
	waitFor(t, func() bool { return len(ownedBy(tmp, gone)) > 0 }, "the second daemon's directory")
	// Both killed at once, so nobody removes its directory: the daemon is
	// stopped first, or it would replace its killed watchdog at once (the
	// lean helper starts in about 2 ms), and the replacement would clean up.
	watchdog := watchdogOf(t, gone.cmd.Process.Pid)
	gone.cmd.Process.Signal(syscall.SIGSTOP)
	syscall.Kill(watchdog.pid, syscall.SIGKILL)
	watchdog.gone(5 * time.Second)
	gone.cmd.Process.Signal(syscall.SIGKILL)
	gone.waitExit(5 * time.Second)
	waitNoRunProcs(tmp, 5*time.Second)
	stale := ownedBy(tmp, gone)
	for _, e := range stale {
		os.Chmod(filepath.Join(tmp, e), 0o500) // as a program may leave it
	}
	if len(stale) == 0 {
		t.Fatal("the killed daemon left nothing to sweep")
	}
	unowned := filepath.Join(tmp, "coderun-1234567")
	os.Mkdir(unowned, 0o700)

	third := started(t, env)
	waitFor(t, func() bool {
		return bytes.Contains([]byte(third.stderr.String()), []byte(fmt.Sprintf("msg=\"removed the directories of daemons that are gone\" dir=%s count=%d", tmp, len(stale))))
	}, "the sweep's log line")
	for _, e := range stale {
		if _, err := os.Lstat(filepath.Join(tmp, e)); !os.IsNotExist(err) {
			t.Errorf("%s: not swept (%v)", e, err)
		}
	}
	if _, err := os.Lstat(unowned); err != nil {
		t.Errorf("a directory that names no owner was swept: %v", err)
	}
	if len(heldBy(tmp, live)) < 2 {
		t.Errorf("the live daemon's directories were swept: %v left of them", heldBy(tmp, live))
	}
	for _, d := range []*daemon{live, third} {
		expectOK(t, d.run(prog("open('f', 'w').write('x')\nreturn 1")), "1")
	}
	os.Remove(unowned)
}

// ownedBy lists d's homes in tmp: the entries whose owner record names d's
// process (docs/containment.md §1).
func ownedBy(tmp string, d *daemon) []string {
	var out []string
	for _, e := range dirEntries(tmp) {
		record, _ := os.ReadFile(filepath.Join(tmp, e, "owner"))
		if strings.HasPrefix(string(record), strconv.Itoa(d.cmd.Process.Pid)+" ") {
			out = append(out, e)
		}
	}
	return out
}

// heldBy lists the directories in d's homes in tmp.
func heldBy(tmp string, d *daemon) []string {
	var out []string
	for _, home := range ownedBy(tmp, d) {
		for _, e := range dirEntries(filepath.Join(tmp, home)) {
			if e != "owner" {
				out = append(out, filepath.Join(home, e))
			}
		}
	}
	return out
}

// sessionOpen brings d to an open session and a fork of it (where the
// daemon can fork), each with a folder, a link out, a file its interpreter
// holds open and, in tier sandbox, its working directory renamed inside its
// home with a link out at its name; it returns the daemon's pid.
func sessionOpen(t *testing.T, d *daemon, outside string) {
	t.Helper()
	init := d.call("initialize", "{}")
	sid := d.open(`{}`)
	sessions := []string{sid}
	d.srun(sid, fmt.Sprintf("import os\nos.makedirs('keep/inner')\nheld = open('held-open', 'w')\nheld.write('x' * 100000)\nos.symlink(%q, 'dir-link')", outside))
	if strings.Contains(string(init.Result), `"fork":true`) {
		sessions = append(sessions, d.fork(sid))
	}
	if suiteTier != "sandbox" {
		return // tier process: the renamed directory would be outside every directory the daemon registered
	}
	for _, s := range sessions {
		if r := d.srun(s, swapProgram(fmt.Sprintf("os.symlink(%q, cwd)", outside))); string(r.Value) != `"swapped"` {
			t.Fatalf("the swap: %s %+v", r.Value, r.Error)
		}
	}
}

// TestDaemonSIGKILLSession (C644): a daemon SIGKILLed while a session and
// its fork are open (their directories holding a link out and a file held
// open, and in tier sandbox renamed with a link at their names) leaves its
// TMPDIR empty: the watchdog removes the session's directories. Killed
// together with its watchdog, the next daemon's start-up sweep removes them.
func TestDaemonSIGKILLSession(t *testing.T) {
	leakcheck.Check(t)
	t.Run("watchdog", func(t *testing.T) {
		crashAt(t, map[string]string{"CODERUN_WARM_POOL": "1"}, func(t *testing.T, d *daemon, _, outside string) {
			sessionOpen(t, d, outside)
		})
	})
	t.Run("sweep", func(t *testing.T) {
		tmp, outside := t.TempDir(), t.TempDir()
		env := map[string]string{"TMPDIR": tmp, "CODERUN_WARM_POOL": "0"}
		gone := start(t, env)
		sessionOpen(t, gone, outside)
		stale := ownedBy(tmp, gone)
		watchdog := watchdogOf(t, gone.cmd.Process.Pid)
		gone.cmd.Process.Signal(syscall.SIGSTOP) // or it replaces its killed watchdog, which cleans up
		syscall.Kill(watchdog.pid, syscall.SIGKILL)
		watchdog.gone(5 * time.Second)
		gone.cmd.Process.Signal(syscall.SIGKILL)
		gone.waitExit(5 * time.Second)
		waitNoRunProcs(tmp, 5*time.Second)
		if len(stale) == 0 {
			t.Fatal("the killed daemon left nothing to sweep")
		}
		next := started(t, env)
		waitFor(t, func() bool { return len(ownedBy(tmp, gone)) == 0 }, "the sweep of the killed daemon's directories")
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Errorf("the directory the sessions linked to holds %v", ents)
		}
		expectOK(t, next.run(prog("return 1")), "1")
	})
}
