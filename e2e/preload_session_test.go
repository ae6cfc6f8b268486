package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// A session opens on a fork of the preloaded fork server in both tiers
// (docs/containment-start-modes.md §4.4); in tier sandbox the fork is
// contained as a spawned session's child is (§4.2).

// sessionPreload is a preload of standard-library modules the bootstrap
// does not import itself: cheap to load, and absent from a session's
// sys.modules unless it is a fork of the preloaded server.
const sessionPreload = "statistics,csv,uuid"

// containedProbe, in tier sandbox, reports what a session's program can
// reach: its confinement flags, whether its parent is its namespace's init,
// how many processes it sees besides the init and itself (the fork server,
// outside its PID namespace, is not one), and whether it can write beside
// its session's home.
const containedProbe = `import os
status = open("/proc/self/status").read()
others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
outside = os.path.dirname(os.path.dirname(os.getcwd()))
try:
    open(os.path.join(outside, "escaped"), "w").close()
    wrote = True
except OSError:
    wrote = False
return ["NoNewPrivs:\t1" in status, "Seccomp:\t2" in status, os.getppid() == 1,
        len(others), wrote]`

// TestPreloadSessionC1130: a session opened on a preloading daemon finds the
// preload in sys.modules in either tier, keeps its state across runs, and a
// fork of it starts from that state with the preload.
func TestPreloadSessionC1130(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_PRELOAD": sessionPreload})
	preloadReady(t, d)
	sid := d.open(`{}`)
	r := d.srun(sid, "import sys\nkept = 41\nreturn [m in sys.modules for m in ('statistics', 'csv', 'uuid')]")
	if r.Error != nil || compact(r.Value) != "[true,true,true]" {
		t.Errorf("a session on a preloading daemon (tier %s): %s %+v, want the preload imported", suiteTier, r.Value, r.Error)
	}
	f := d.fork(sid)
	if r := d.srun(f, "import sys\nreturn [kept + 1, 'statistics' in sys.modules]"); r.Error != nil || compact(r.Value) != "[42,true]" {
		t.Errorf("a fork of a preloaded session: %s %+v", r.Value, r.Error)
	}
}

// TestPreloadSessionC1131Contained: a sandboxed session opened on the
// preloaded server, and a fork of it, are contained as a spawned session's
// child is: no_new_privs, seccomp, a child of its namespace's init, the
// server out of sight, nothing writable beside its home; a fork of it is
// contained the same way, reads its namespace's /proc and writes its
// /dev/shm, and cannot write its source's directory.
func TestPreloadSessionC1131Contained(t *testing.T) {
	onlyInTier(t, "sandbox")
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_PRELOAD": sessionPreload})
	preloadReady(t, d)
	sid := d.open(`{}`)
	if r := d.srun(sid, "import sys\nreturn 'statistics' in sys.modules"); compact(r.Value) != "true" {
		t.Fatalf("the session is not a fork of the preloaded server: %s %+v", r.Value, r.Error)
	}
	if r := d.srun(sid, containedProbe); r.Error != nil || compact(r.Value) != "[true,true,true,0,false]" {
		t.Errorf("the preloaded session's containment: %s %+v, want [true,true,true,0,false]", r.Value, r.Error)
	}
	srcDir := d.srun(sid, "import os\nreturn os.getcwd()").Value
	f := d.fork(sid)
	// The fork sees its source besides the init and itself: they share the namespaces.
	if r := d.srun(f, containedProbe); r.Error != nil || compact(r.Value) != "[true,true,true,1,false]" {
		t.Errorf("its fork's containment: %s %+v, want [true,true,true,1,false]", r.Value, r.Error)
	}
	shm := "open('/dev/shm/fork-note', 'w').write('x')\nreturn open('/dev/shm/fork-note').read()"
	if r := d.srun(f, shm); r.Error != nil || compact(r.Value) != `"x"` {
		t.Errorf("the fork's /dev/shm (its namespace's own): %s %+v", r.Value, r.Error)
	}
	write := fmt.Sprintf("import os\ntry:\n    open(os.path.join(%s, 'x'), 'w').close()\n    return 'wrote'\nexcept OSError as e:\n    return type(e).__name__", srcDir)
	if r := d.srun(f, write); r.Error != nil || compact(r.Value) != `"PermissionError"` {
		t.Errorf("a fork writing its source's directory: %s %+v, want PermissionError", r.Value, r.Error)
	}
}

// TestPreloadSessionC1132Budgets: a sandboxed session opened on the
// preloaded server keeps a session's budgets: files it holds but no
// directory lists count against its disk budget, and its interpreter's CPU
// is bounded by the session's lifetime total.
func TestPreloadSessionC1132Budgets(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_PRELOAD": sessionPreload, "CODERUN_MAX_DISK_MB": "64",
		"CODERUN_SESSION_CPU_SECONDS": "1"})
	preloadReady(t, d)
	sid := d.open(`{"limits":{"maxDiskMb":8}}`)
	if r := d.srun(sid, "import sys\nreturn 'statistics' in sys.modules"); compact(r.Value) != "true" {
		t.Fatalf("the session is not a fork of the preloaded server: %s %+v", r.Value, r.Error)
	}
	r := d.srun(sid, fmt.Sprintf(hideFiles, 3, "mmap"), `"limits":{"maxWallMs":60000}`)
	if r.Error == nil || r.Error.Kind != "output-limit" || !strings.Contains(r.Error.Message, "maxDiskMb=8") {
		t.Errorf("18 MiB mapped unlisted in a preloaded session under maxDiskMb 8: %s %+v, want output-limit naming maxDiskMb=8", r.Value, r.Error)
	}
	if reason, msg := d.closedNote(sid, 30*time.Second); reason != "lost" || !strings.Contains(msg, "maxDiskMb=8") {
		t.Errorf("session/closed %q %q, want lost naming maxDiskMb=8", reason, msg)
	}
	sid = d.open(`{}`)
	spin := "import time\nt = time.process_time()\nwhile time.process_time() - t < 8:\n    pass"
	r = d.srun(sid, spin, `"limits":{"cpuSeconds":20}`)
	if r.Error == nil || r.Error.Kind != "timeout" || r.Error.Budget != "cpu" ||
		!strings.Contains(r.Error.Message, "CODERUN_SESSION_CPU_SECONDS=1") || r.Session.Alive {
		t.Errorf("a preloaded session's run past its lifetime CPU: %+v %+v", r.Error, r.Session)
	}
}

// memoryScan reads every writable mapping of the program's own process (a
// copy of the fork server's memory, in a forked child) and reports whether
// it found its own proxy URL, with its egress token, and which other ones.
const memoryScan = `import os, re
mine = os.environ["HTTP_PROXY"].encode()
found = set()
with open("/proc/self/maps") as m:
    regions = [line.split() for line in m]
with open("/proc/self/mem", "rb", 0) as mem:
    for r in regions:
        a, b = (int(x, 16) for x in r[0].split("-"))
        if not r[1].startswith("rw") or b - a > 512 << 20:
            continue
        try:
            mem.seek(a)
            data = mem.read(b - a)
        except OSError:
            continue
        found.update(re.findall(rb"http://coderun:[\w-]{22}@[\x21-\x7e]+", data))
return [mine in found, sorted(x.decode() for x in found - {mine})]`

// TestPreloadSessionC1133ServerMemory: a fresh run is a copy of the fork
// server's memory, which received every earlier spawn request: the
// session's and the runs' environments, egress tokens included. None of
// them is left there for a later run to read.
func TestPreloadSessionC1133ServerMemory(t *testing.T) {
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string { return `{"allow":["plain.test:` + plain + `"]}` })
	env := u.env
	env["CODERUN_PRELOAD"] = sessionPreload
	d := started(t, env)
	preloadReady(t, d)
	d.open(`{}`)
	d.run(prog("return 1"))
	if r := d.run(prog(memoryScan)); r.Error != nil || compact(r.Value) != "[true,[]]" {
		t.Errorf("a run's memory after a session's and a run's spawns: %s %+v, want its own token only", r.Value, r.Error)
	}
}

// TestPreloadC1134PackedAllocations: a run's new objects do not land in
// the free blocks the server's objects left scattered over its pages (each
// would copy a page on its first write): with a preload that leaves one
// free 64-byte block in every page of 12 MiB, 3 000 new objects of that
// size cost a run tens of page faults, not thousands.
func TestPreloadC1134PackedAllocations(t *testing.T) {
	leakcheck.Check(t)
	py := preloadVenv(t, map[string]string{
		// bytes of length 31 are 64-byte blocks, 64 to a page: one freed in every 64.
		"coderun_holes": "_kept = [bytes(31) for _ in range(200000)]\ndel _kept[::64]\n",
	})
	d := started(t, map[string]string{"CODERUN_PYTHON_BIN": py, "CODERUN_PRELOAD": "coderun_holes"})
	preloadReady(t, d)
	alloc := "import resource\nbefore = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n" +
		"kept = [bytes(31) for _ in range(3000)]\nreturn resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before"
	r := d.run(prog(alloc))
	var faults int
	if r.Error != nil || json.Unmarshal(r.Value, &faults) != nil || faults > 600 {
		t.Errorf("3 000 new 64-byte objects in a run forked from a server with scattered free blocks: %s %+v page faults, want under 600", r.Value, r.Error)
	}
}

// TestPreloadSessionC1135ServerDeath: a session forked from the server lives
// within the parent-death chain (daemon → server → child): the server's
// death ends it, closed lost, in either tier; the next session opens.
func TestPreloadSessionC1135ServerDeath(t *testing.T) {
	leakcheck.Check(t)
	tmp := t.TempDir()
	d := started(t, map[string]string{"CODERUN_PRELOAD": sessionPreload, "TMPDIR": tmp})
	preloadReady(t, d)
	sid := d.open(`{}`)
	if r := d.srun(sid, "import sys\nreturn 'statistics' in sys.modules"); compact(r.Value) != "true" {
		t.Fatalf("the session is not a fork of the preloaded server: %s %+v", r.Value, r.Error)
	}
	killForkServer(t, tmp)
	if reason, msg := d.closedNote(sid, 30*time.Second); reason != "lost" {
		t.Errorf("session/closed %q %q after the fork server's death, want lost", reason, msg)
	}
	if r := d.srun(d.open(`{}`), "return 1"); r.Error != nil || compact(r.Value) != "1" {
		t.Errorf("a session opened after the server's death: %s %+v", r.Value, r.Error)
	}
}

// TestPreloadC1136ShutdownWhileLoading: a daemon whose stdin closes while
// its preload is still importing shuts down as any other (exit 0), without
// reporting the server it stopped as a failed preload.
func TestPreloadC1136ShutdownWhileLoading(t *testing.T) {
	leakcheck.Check(t)
	py := preloadVenv(t, map[string]string{"coderun_forever": "import time\nwhile True:\n    time.sleep(0.01)\n"})
	d := started(t, map[string]string{"CODERUN_PYTHON_BIN": py, "CODERUN_PRELOAD": "coderun_forever"})
	expectOK(t, d.run(prog("return 1")), "1") // served cold meanwhile
	d.stdin.Close()
	if code := d.waitExit(60 * time.Second); code != 0 || strings.Contains(d.stderr.String(), "configuration error") {
		t.Errorf("exit %d, want 0 and no configuration error; stderr:\n%s", code, d.stderr)
	}
}
