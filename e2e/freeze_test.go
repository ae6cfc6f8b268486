package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// spinProgram leaves a session spinning: a thread of the interpreter named
// spinidle and a child process named spinkid that left the interpreter's
// process group and session with setsid(). kid is kept to be killed at the
// end (in tier process such a child outlives its session). The run ends once
// both are named.
const spinProgram = `import ctypes, subprocess, sys, threading
libc = ctypes.CDLL(None)
named = threading.Event()
def spin():
    libc.prctl(15, b'spinidle', 0, 0, 0)
    named.set()
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
kid = subprocess.Popen([sys.executable, '-c', "import ctypes, os\nctypes.CDLL(None).prctl(15, b'spinkid', 0, 0, 0)\nos.write(1, b'n')\nwhile True: pass"],
    start_new_session=True, stdout=subprocess.PIPE)
named.wait()
kid.stdout.read(1)
return 'spinning'`

// TestSessionC340IdleFrozen: between runs a session's interpreter, every
// thread of it and a descendant that left its process group are stopped,
// so an idle session uses no CPU; the next run starts them again and is
// billed only for what they used while it ran. A fork of the frozen
// session works, and is frozen in turn once idle.
func TestSessionC340IdleFrozen(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{}`)
	if r := d.srun(sid, spinProgram); r.Error != nil || !r.Session.Alive {
		t.Fatalf("spin run: %+v", r.Error)
	}
	interp := spinnerOf(t, d.cmd.Process.Pid, "spinidle")
	kid := spinnerOf(t, d.cmd.Process.Pid, "spinkid")
	waitFor(t, func() bool { return treeStopped(interp) && treeStopped(kid) }, "the idle session to be frozen")
	before := treeTicks(interp)
	burnCPU(300 * time.Millisecond) // CPU was there to take
	if after := treeTicks(interp); after != before {
		t.Fatalf("the idle session used %d ticks of CPU while frozen", after-before)
	}
	r := d.srun(sid, "return 1")
	if r.Error != nil || !r.Session.Alive {
		t.Fatalf("run after idling: %+v", r.Error)
	}
	waitFor(t, func() bool { return treeStopped(interp) && treeStopped(kid) }, "the session to be frozen again")
	ran := treeTicks(interp) - before
	if r.Stats.CPUMs > (ran+1)*10 {
		t.Errorf("the run was billed %d ms; the session used %d ms while thawed for it", r.Stats.CPUMs, ran*10)
	}

	f := d.fork(sid)
	forkSpin := "import ctypes, threading\nnamed = threading.Event()\ndef spin():\n    ctypes.CDLL(None).prctl(15, b'spinfork', 0, 0, 0)\n" +
		"    named.set()\n    while True:\n        pass\nthreading.Thread(target=spin, daemon=True).start()\nnamed.wait()"
	if r := d.srun(f, forkSpin); r.Error != nil || !r.Session.Alive {
		t.Fatalf("run on the fork of a frozen session: %+v", r.Error)
	}
	fork := spinnerOf(t, d.cmd.Process.Pid, "spinfork")
	waitFor(t, func() bool { return treeStopped(fork) && treeStopped(interp) }, "the fork and its source to be frozen")
	if r := d.srun(f, "return 2"); string(r.Value) != "2" {
		t.Errorf("the fork after idling: %s %+v", r.Value, r.Error)
	}
	if r := d.srun(sid, "kid.kill()\nkid.wait()\nreturn 2"); string(r.Value) != "2" {
		t.Errorf("the source after its fork: %s %+v", r.Value, r.Error)
	}
	d.call("session/close", `{"sessionId":"`+f+`"}`)
	d.call("session/close", `{"sessionId":"`+sid+`"}`)
}

// TestSessionC342SandboxOrphanFrozen: in tier sandbox a process a
// session's program orphaned with a double fork (the namespace's init took
// it in) is stopped too while every member of the family is idle, and runs
// again during a run. (In tier process such an orphan leaves the daemon's
// reach: containment.md §2, known limits.)
func TestSessionC342SandboxOrphanFrozen(t *testing.T) {
	onlyInTier(t, "sandbox")
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{}`)
	// The orphan beats in the namespace's /dev/shm, which outlives no family.
	orphan := "import ctypes, os\nr, w = os.pipe()\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n" +
		"        ctypes.CDLL(None).prctl(15, b'spinorphan', 0, 0, 0)\n        os.write(w, b'n')\n        os.closerange(0, 1024)\n" +
		"        n = 0\n        while True:\n            n += 1\n            if n % 100000 == 0:\n" +
		"                with open('/dev/shm/beat.tmp', 'w') as f:\n                    f.write(str(n))\n" +
		"                os.replace('/dev/shm/beat.tmp', '/dev/shm/beat')\n    os._exit(0)\nos.wait()\nos.read(r, 1)\nreturn 'orphaned'"
	if r := d.srun(sid, orphan); r.Error != nil || !r.Session.Alive {
		t.Fatalf("orphaning run: %+v", r.Error)
	}
	pid := spinnerOf(t, d.cmd.Process.Pid, "spinorphan")
	waitFor(t, func() bool { return treeStopped(pid) }, "the orphan to be stopped")
	before := treeTicks(pid)
	burnCPU(300 * time.Millisecond)
	if after := treeTicks(pid); after != before {
		t.Fatalf("the orphan used %d ticks of CPU while its family was idle", after-before)
	}
	// The run ends once the orphan has beaten twice while it runs.
	beats := "import os, time\ndef beat():\n    try:\n        return open('/dev/shm/beat').read()\n    except OSError:\n        return ''\n" +
		"seen = {beat()}\nwhile len(seen) < 3:\n    seen.add(beat())\n    time.sleep(0.005)\nreturn 1"
	if r := d.srun(sid, beats); r.Error != nil {
		t.Fatalf("a run while the orphan is thawed: %+v", r.Error)
	}
	waitFor(t, func() bool { return treeStopped(pid) }, "the orphan to be stopped again")
}

// spinnerOf waits for the process among the daemon's descendants of which
// a thread is named name, and returns its pid.
func spinnerOf(t *testing.T, daemon int, name string) int {
	t.Helper()
	pid := 0
	waitFor(t, func() bool {
		for _, p := range procTree(daemon) {
			tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
			for _, task := range tasks {
				comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "task", task.Name(), "comm"))
				if strings.TrimSpace(string(comm)) == name {
					pid = p
					return true
				}
			}
		}
		return false
	}, "a process with a thread named "+name)
	return pid
}

// procTree is pid and its descendants.
func procTree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		files, _ := filepath.Glob("/proc/" + strconv.Itoa(out[i]) + "/task/*/children")
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// statFields is /proc/<path>/stat from field 3 on.
func statFields(path string) []string {
	b, err := os.ReadFile("/proc/" + path + "/stat")
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// treeStopped reports whether every thread of pid and of its descendants is
// stopped.
func treeStopped(pid int) bool {
	for _, p := range procTree(pid) {
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		for _, task := range tasks {
			if f := statFields(strconv.Itoa(p) + "/task/" + task.Name()); len(f) > 0 && f[0] != "T" {
				return false
			}
		}
	}
	return true
}

// treeTicks is the CPU (clock ticks) pid and its descendants have used,
// reaped children included.
func treeTicks(pid int) int64 {
	var sum int64
	for _, p := range procTree(pid) {
		f := statFields(strconv.Itoa(p))
		for _, k := range []int{11, 12, 13, 14} { // fields 14-17
			if len(f) > k {
				n, _ := strconv.ParseInt(f[k], 10, 64)
				sum += n
			}
		}
	}
	return sum
}

// burnCPU spins on one thread until that thread has used d of CPU: a
// condition (the machine gave the test CPU), not a stretch of time.
func burnCPU(d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	used := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for start := used(); used()-start < d; {
	}
}

// TestSessionC341LifetimeCPU: a run that uses up its session's lifetime
// CPU (CODERUN_SESSION_CPU_SECONDS) ends timeout with budget cpu, naming
// the lifetime total — on the session, on a fork, and on a fork whose
// source used most of the total first: in tier sandbox the family shares
// it (the namespace's init kills every member), in tier process each fork
// inherits the source's limit and counts its own CPU from zero.
func TestSessionC341LifetimeCPU(t *testing.T) {
	spin := func(s float64) string {
		return "import time\nt = time.process_time()\nwhile time.process_time() - t < " + strconv.FormatFloat(s, 'f', 1, 64) + ":\n    pass"
	}
	for _, which := range []string{"source", "fork", "family"} {
		t.Run(which, func(t *testing.T) {
			leakcheck.Check(t)
			d := started(t, map[string]string{"CODERUN_SESSION_CPU_SECONDS": "3"})
			sid := d.open(`{}`)
			if which == "family" {
				if r := d.srun(sid, spin(1.6), `"limits":{"cpuSeconds":20}`); r.Error != nil {
					t.Fatalf("the source's first run: %+v", r.Error)
				}
			}
			if which != "source" {
				sid = d.fork(sid)
			}
			r := d.srun(sid, spin(8), `"limits":{"cpuSeconds":20}`)
			if r.Error == nil || r.Error.Kind != "timeout" || r.Error.Budget != "cpu" ||
				!strings.Contains(r.Error.Message, "CODERUN_SESSION_CPU_SECONDS=3") || r.Session.Alive {
				t.Errorf("a run past the session's lifetime CPU: %+v %+v", r.Error, r.Session)
			}
		})
	}
}
