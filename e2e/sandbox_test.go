package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	skipWithoutSandbox(t, env)
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

	// The system's fonts are readable (plotting libraries read them); the
	// rest of /etc is not.
	if _, err := os.Stat("/etc/fonts/fonts.conf"); err == nil {
		r = d.run(prog(`def readable(path):
    try:
        open(path, "rb").close()
        return True
    except PermissionError:
        return False
return [readable("/etc/fonts/fonts.conf"), readable("/etc/passwd")]`))
		expectOK(t, r, `[true,false]`)
	}
}

// runCheck runs `coderun-rpc --check` under env; it returns the report.
func runCheck(t *testing.T, env map[string]string) ([]byte, error) {
	cmd := exec.Command(daemonBin, "--check")
	cmd.Env = environ(t, env)
	return cmd.CombinedOutput()
}

// skipWithoutSandbox skips t where `--check` under env (which asks for tier
// sandbox) says the kernel lacks a feature; any other failure fails t.
func skipWithoutSandbox(t *testing.T, env map[string]string) {
	t.Helper()
	if out, err := runCheck(t, env); err != nil {
		if strings.Contains(string(out), `CODERUN_ISOLATION="sandbox": sandbox isolation needs `) &&
			strings.Contains(string(out), ", which this kernel does not provide") {
			t.Skipf("kernel lacks a sandbox feature: %s", out)
		}
		t.Fatalf("--check in tier sandbox: %v\n%s", err, out)
	}
}

// An interpreter of a virtual environment starts in the sandbox wherever it
// starts afresh — a spawned run, a session — though its start reads the
// environment's pyvenv.cfg, outside the trees of the interpreter it links to.
func TestSandboxVenv(t *testing.T) {
	t.Parallel()
	venv := t.TempDir()
	if out, err := exec.Command(realPython, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("python -m venv: %v\n%s", err, out)
	}
	python := filepath.Join(venv, "bin", "python")
	// --check's smoke run starts the venv's interpreter afresh: it fails
	// here, not with a skip, when the sandbox refuses it.
	skipWithoutSandbox(t, map[string]string{"CODERUN_ISOLATION": "sandbox", "CODERUN_START_MODE": "spawn", "CODERUN_PYTHON_BIN": python})
	for _, mode := range []string{"spawn", "fork"} {
		d := started(t, map[string]string{"CODERUN_ISOLATION": "sandbox", "CODERUN_START_MODE": mode, "CODERUN_PYTHON_BIN": python})
		expectOK(t, d.run(prog("import sys\nreturn sys.prefix != sys.base_prefix")), "true")
		id := d.open("{}")
		expectOK(t, d.run(prog("return 2", `"sessionId":"`+id+`"`)), "2")
	}
}

// The default tier is auto: with CODERUN_ISOLATION unset, initialize reports
// the tier `--check` finds and why ("auto: …"); where that is tier process,
// the daemon's log says so at start-up.
func TestDefaultTier(t *testing.T) {
	t.Parallel()
	env := map[string]string{useDefaultTier: "", "CODERUN_WARM_POOL": "0"}
	out, err := runCheck(t, env)
	if err != nil {
		t.Fatalf("--check: %v\n%s", err, out)
	}
	found := regexp.MustCompile(`(?m)^isolation: (process|sandbox) \((auto: .+)\)$`).FindStringSubmatch(string(out))
	if found == nil {
		t.Fatalf("--check names no tier chosen by auto:\n%s", out)
	}
	d := started(t, env)
	var init struct {
		Capabilities struct {
			Isolation string `json:"isolation"`
			Reason    string `json:"isolationReason"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(d.snapshot()[0].m.Result, &init); err != nil {
		t.Fatal(err)
	}
	if c := init.Capabilities; c.Isolation != found[1] || c.Reason != found[2] {
		t.Errorf("initialize reports %q (%q); --check found %q (%q)", c.Isolation, c.Reason, found[1], found[2])
	}
	warned := strings.Contains(d.stderr.String(), "tier sandbox is not available here")
	if want := found[1] == "process"; warned != want {
		t.Errorf("start-up warning logged: %v, want %v; stderr:\n%s", warned, want, d.stderr)
	}
	expectOK(t, d.run(prog("return 1")), "1")
}
