package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// TestStartModes runs the same cases with children spawned (a fresh
// interpreter each) and forked from the fork server (the default of the rest
// of this package's tests): the observables are the same (docs/containment-start-modes.md §4).
func TestStartModes(t *testing.T) {
	for _, mode := range []string{StartSpawn, StartFork} {
		t.Run(mode, func(t *testing.T) {
			runCases(t, func(c *Config) { c.StartMode = mode; c.WarmPool = 1 }, append(startModeCases, endingCases...))
		})
	}
}

var startModeCases = []tcase{
	{name: "C45", program: "return 2 + 2", value: "4"},
	{name: "C39", bindings: tools("echo", "fail"), client: map[string]behaviour{"echo": wrap(), "fail": fail("nope")}, nCalls: 2,
		program: "first = await tools.echo({\"n\": 1})\ntry:\n    await tools.fail({})\nexcept RuntimeError as e:\n    caught = str(e)\nreturn {\"first\": first, \"caught\": caught}",
		value:   `{"first":{"echoed":{"n":1}},"caught":"nope"}`},
	{name: "view", program: `import os, sys, tempfile
env = dict(os.environ)
env.pop("LC_CTYPE", None)
here = os.getcwd()
return {"keys": sorted(env), "tmp": os.environ["TMPDIR"] == here and tempfile.gettempdir() == here,
        "argv0": sys.argv[0] == here + "/bootstrap.py", "file": sys.modules["__main__"].__file__ == sys.argv[0],
        "pgid": os.getpgid(0) == os.getpid(), "sid": os.getsid(0) == os.getpid(),
        "fds": [f for f in range(64) if os.path.exists("/proc/self/fd/%d" % f)]}`,
		value: `{"keys":["TMPDIR"],"tmp":true,"argv0":true,"file":true,"pgid":true,"sid":true,"fds":[0,1,2,3]}`},
}

// A fork server that dies (a hostile program can kill its parent) costs the
// runs of its children, never the daemon: the next run starts cold or from a
// new server, and Shutdown leaves nothing behind.
func TestForkServerDeath(t *testing.T) {
	m := check(t, func(c *Config) { c.WarmPool = 0 })
	res, fc, el := execute(t, m, tcase{name: "kill-parent", program: "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(10)"})
	tcase{kind: protocol.KindWorkerExit, maxElapsed: 8 * time.Second,
		contains: []string{"failed to wait for python subprocess: wait ", ": the fork server ended (its children die with it)"}}.verify(t, res, fc, el)
	for i := range 3 {
		res, fc, el = execute(t, m, tcase{name: fmt.Sprintf("after-%d", i), program: "return 2 + 2"})
		tcase{value: "4"}.verify(t, res, fc, el)
	}
}

// Forked children share the server's state at the fork, not its random
// generator: two runs never draw the same numbers.
func TestForkedRandomIsFresh(t *testing.T) {
	m := check(t, func(c *Config) { c.WarmPool = 1 })
	draw := tcase{program: "import random\nreturn random.getrandbits(52)"}
	seen := map[string]bool{}
	for i := range 3 {
		draw.name = fmt.Sprintf("draw-%d", i)
		res, _, _ := execute(t, m, draw)
		if res.Error != nil || seen[string(res.Value)] {
			t.Fatalf("run %d: %s %+v (seen: %v)", i, res.Value, res.Error, seen)
		}
		seen[string(res.Value)] = true
	}
}

// endingCases end a run by exit, signal, wall clock and CPU: every start
// mode and tier must report them alike.
var endingCases = []tcase{
	{name: "C115", program: "import os\nos._exit(7)", kind: protocol.KindWorkerExit,
		message: "python exited (code=7, signal=null) before completing", exitCode: intp(7)},
	{name: "C116", program: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", kind: protocol.KindWorkerExit,
		message: "python exited (code=null, signal=SIGKILL) before completing", signal: "SIGKILL"},
	{name: "C110", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 500 }), program: "import time\nwhile True:\n    time.sleep(1)",
		kind: protocol.KindTimeout, budget: protocol.BudgetWall, message: "wall-clock ceiling reached (500ms)"},
	{name: "C120", limits: lim(func(l *protocol.Limits) { l.CPUSeconds = 1; l.MaxWallMs = 15000 }),
		program: "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass",
		kind:    protocol.KindTimeout, budget: protocol.BudgetCPU,
		message: "CPU time exhausted (limit at most 1s; a stricter inherited RLIMIT_CPU can fire sooner)"},
}
