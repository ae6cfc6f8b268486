package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// CODERUN_ISOLATION=sandbox: refused with the exact feature line where the
// kernel lacks one; otherwise initialize reports it and a run sees the
// namespace's init as its parent and no network.
func TestSandboxTier(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CODERUN_ISOLATION": "sandbox", "CODERUN_WARM_POOL": "0", "CODERUN_GRACE_MS": "1500"}
	cmd := exec.Command(daemonBin, "--check")
	cmd.Env = environ(t, env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), `CODERUN_ISOLATION="sandbox": sandbox isolation needs `) &&
			strings.Contains(string(out), ", which this kernel does not provide") {
			t.Skipf("kernel lacks a sandbox feature: %s", out)
		}
		t.Fatalf("--check in tier sandbox: %v\n%s", err, out)
	}
	d := started(t, env)
	if !strings.Contains(string(d.snapshot()[0].m.Result), `"isolation":"sandbox"`) {
		t.Errorf("initialize: %s", d.snapshot()[0].m.Result)
	}
	r := d.run(prog(`import os, socket
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    net = "reachable"
except OSError:
    net = "unreachable"
return [os.getppid(), net]`))
	expectOK(t, r, `[1,"unreachable"]`)

	// The namespace's init outlives the daemon's group SIGTERM: a program
	// that ignores it runs on for the grace period. (An init that died of
	// it would take the program with it at once.)
	start := time.Now()
	r = d.run(prog("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(30)", `"limits":{"maxWallMs":300}`))
	if r.Error == nil || r.Error.Kind != "timeout" {
		t.Errorf("a run past its wall clock: %+v, want a timeout", r)
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("the run ended %v after it started: the grace period (1.5 s) was cut short", took)
	}

	// Installed tools run; what the program writes does not.
	r = d.run(prog(`import os, subprocess
hits = subprocess.run(["sh", "-c", "printf 'a\nb\na\n' | grep -c a"], capture_output=True, check=True).stdout
fd = os.open("tool", os.O_WRONLY | os.O_CREAT, 0o755)
os.write(fd, b"#!/bin/sh\necho ran\n")
os.close(fd)
try:
    subprocess.run(["./tool"])
    own = "ran"
except PermissionError:
    own = "denied"
return [hits.decode().strip(), own]`))
	expectOK(t, r, `["2","denied"]`)
}
