package session

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// TestSandbox runs a handful of cases in tier sandbox (skipped where the
// kernel lacks a feature), spawned and forked from the sandboxed fork
// server: same results as tier process, plus what only the sandbox gives
// (init parent, no network, a setsid orphan dies with the run).
func TestSandbox(t *testing.T) {
	if err := sandbox.Probe(); err != nil {
		t.Skip(err)
	}
	for _, mode := range []string{StartSpawn, StartFork} {
		t.Run(mode, func(t *testing.T) {
			runCases(t, func(c *Config) { c.Isolation, c.StartMode, c.WarmPool = IsolationSandbox, mode, 1 }, sandboxCases)
		})
	}
}

// orphanMarker names setsid-orphan's background process on the host.
var orphanMarker = "orphan-marker-" + strconv.Itoa(os.Getpid())

var sandboxCases = append(endingCases, []tcase{
	{name: "C45", program: "return 2 + 2", value: "4"},
	{name: "C39", bindings: tools("echo", "fail"), client: map[string]behaviour{"echo": wrap(), "fail": fail("nope")}, nCalls: 2,
		program: "first = await tools.echo({\"n\": 1})\ntry:\n    await tools.fail({})\nexcept RuntimeError as e:\n    caught = str(e)\nreturn {\"first\": first, \"caught\": caught}",
		value:   `{"first":{"echoed":{"n":1}},"caught":"nope"}`},
	{name: "view", program: `import os, socket
env = dict(os.environ)
env.pop("LC_CTYPE", None)
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1)
    net = "up"
except OSError:
    net = "down"
try:
    open("/etc/hostname").read()
    etc = "readable"
except OSError:
    etc = "denied"
open("mine", "w").write("x")
return {"keys": sorted(env), "ppid": os.getppid(), "net": net, "etc": etc}`,
		value: `{"keys":["TMPDIR"],"ppid":1,"net":"down","etc":"denied"}`},
	{name: "setsid-orphan", program: `import os, subprocess, sys
os.write(1, b"leader-diagnostic-no-newline")
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "` + orphanMarker + `"], start_new_session=True)
return "escaped"`, value: `"escaped"`, logsHave: []string{"leader-diagnostic-no-newline"},
		// The run settles once its init is reaped, and the kernel reaps
		// every process of a PID namespace before its init: the orphan is
		// gone by then. (Tier process would settle at the close deadline,
		// the orphan holding stdout, and leave it running.)
		extra: func(t *testing.T, _ protocol.Result, _ *fakeClient) {
			if left := leakcheck.ProcessesWith(orphanMarker); len(left) > 0 {
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Errorf("the setsid orphan outlived its run: %v", left)
			}
		}},
}...)

func TestSandboxTreesNeverHoldPrivatePaths(t *testing.T) {
	trees := []string{"/usr/lib/python3.11", "/usr", "/usr/local/lib", "/opt/py/bin/python3", "/tmp"}
	private := []string{"/tmp", "/usr/local/bin/coderun-rpc"}
	got := sandbox.WithoutAncestors(trees, private)
	want := []string{"/usr/lib/python3.11", "/usr/local/lib", "/opt/py/bin/python3"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("WithoutAncestors = %v, want %v", got, want)
	}
	sb := sandboxFor(realPython(t), t.TempDir(), nil, nil)
	for _, tree := range sb.ReadOnly {
		if tree == "/" || tree == "/usr" || tree == "/usr/bin" {
			t.Errorf("read-only tree %q is wider than the interpreter needs", tree)
		}
	}
}
