package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startupFailure runs the daemon with env (and cwd dir when set) and returns
// its exit code and stderr; it must exit on its own.
func startupFailure(t *testing.T, env map[string]string, dir string) (int, string) {
	t.Helper()
	cmd := exec.Command(daemonBin)
	cmd.Env = environ(t, env)
	cmd.Dir = dir
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v: the daemon started (stderr %q)", env, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

func stub(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Start-up rules (C6–C9, C11–C13, C53, C163, C223): one stderr line naming
// the variable, its value and the rule; exit 2.
func TestConfigurationRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	line := func(v, value, rule string) string {
		return "coderun-rpc: configuration error: " + v + "=\"" + value + "\": " + rule + "\n"
	}
	exact := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"CODERUN_CPU_SECONDS": "0"}, line("CODERUN_CPU_SECONDS", "0", "must be a positive integer")},
		{map[string]string{"CODERUN_MAX_WALL_MS": "-1"}, line("CODERUN_MAX_WALL_MS", "-1", "must be a positive integer")},
		{map[string]string{"CODERUN_CPU_SECONDS": "1.5"}, line("CODERUN_CPU_SECONDS", "1.5", "must be a positive integer")},
		{map[string]string{"CODERUN_CPU_SECONDS": "010"}, line("CODERUN_CPU_SECONDS", "010", "must be a positive integer")},
		{map[string]string{"CODERUN_MAX_LOG_BYTES": "3.5"}, line("CODERUN_MAX_LOG_BYTES", "3.5", "must be a positive integer")},
		{map[string]string{"CODERUN_ADDRESS_SPACE_MB": "8589934592"}, line("CODERUN_ADDRESS_SPACE_MB", "8589934592", "must be at most 8589934591 (its byte count must stay an exact JSON integer)")},
		{map[string]string{"CODERUN_CPU_SECONDS": "9007199254740991"}, line("CODERUN_CPU_SECONDS", "9007199254740991", "must be at most 9007199254740990 (it and its +1 hard limit must stay exact JSON integers)")},
		{map[string]string{"CODERUN_ADDRESS_SPACE_MB": "1e308"}, line("CODERUN_ADDRESS_SPACE_MB", "1e308", "must be a positive integer")},
		{map[string]string{"CODERUN_MAX_LOG_BYTES": "67108801"}, line("CODERUN_MAX_LOG_BYTES", "67108801", "must be at most 67108800 (a frame carrying it must fit the 67108864-byte fd-3 frame cap)")},
		{map[string]string{"CODERUN_MAX_VALUE_BYTES": "67108801"}, line("CODERUN_MAX_VALUE_BYTES", "67108801", "must be at most 67108800 (a frame carrying it must fit the 67108864-byte fd-3 frame cap)")},
		{map[string]string{"CODERUN_MAX_LOG_BYTES": "63"}, line("CODERUN_MAX_LOG_BYTES", "63", "must be at least 64 (a marker-only log must fit)")},
		{map[string]string{"CODERUN_WARM_POOL": "-1"}, line("CODERUN_WARM_POOL", "-1", "must be a non-negative integer")},
		{map[string]string{"CODERUN_MAX_CONCURRENT_RUNS": "2", "CODERUN_WARM_POOL": "3"}, line("CODERUN_WARM_POOL", "3", "must be at most CODERUN_MAX_CONCURRENT_RUNS (2)")},
		{map[string]string{"CODERUN_ISOLATION": "vm"}, line("CODERUN_ISOLATION", "vm", `must be "process", "sandbox" or "auto"`)},
		{map[string]string{"CODERUN_LOG_LEVEL": ""}, line("CODERUN_LOG_LEVEL", "", "must be one of debug, info, warn, error")},
		{map[string]string{"CODERUN_MAX_LOG_BYTES": "50000000", "CODERUN_ADDRESS_SPACE_MB": "256"}, line("CODERUN_MAX_LOG_BYTES", "50000000", "times the 12x worst-case Unicode expansion must fit within the 201326592 bytes left after the 67108864-byte interpreter baseline of the 268435456-byte CODERUN_ADDRESS_SPACE_MB; the most it may be is 16777215")},
		{map[string]string{"CODERUN_MAX_VALUE_BYTES": "50000000", "CODERUN_ADDRESS_SPACE_MB": "256"}, line("CODERUN_MAX_VALUE_BYTES", "50000000", "times the 12x worst-case Unicode expansion must fit within the 201326592 bytes left after the 67108864-byte interpreter baseline of the 268435456-byte CODERUN_ADDRESS_SPACE_MB; the most it may be is 16777215")},
		{map[string]string{"CODERUN_ADDRESS_SPACE_MB": "64"}, line("CODERUN_ADDRESS_SPACE_MB", "64", "must exceed the 67108864-byte interpreter baseline with room for the output budgets, got 64 MiB (67108864 bytes)")},
		{map[string]string{"CODERUN_ADDRESS_SPACE_MB": "32"}, line("CODERUN_ADDRESS_SPACE_MB", "32", "must exceed the 67108864-byte interpreter baseline with room for the output budgets, got 32 MiB (33554432 bytes)")},
		{map[string]string{"CODERUN_PYTHON_BIN": ""}, line("CODERUN_PYTHON_BIN", "", "must be a non-empty path")},
		{map[string]string{"CODERUN_PYTHON_BIN": filepath.Join(dir, "missing")}, line("CODERUN_PYTHON_BIN", filepath.Join(dir, "missing"), "is not an executable regular file")},
		{map[string]string{"CODERUN_PYTHON_BIN": noexec}, line("CODERUN_PYTHON_BIN", noexec, "is not an executable regular file")},
		{map[string]string{"CODERUN_PYTHON_BIN": dir}, line("CODERUN_PYTHON_BIN", dir, "is not an executable regular file")},
		{map[string]string{"CODERUN_PYTHON_BIN": "./definitely-not-there-python"}, line("CODERUN_PYTHON_BIN", "./definitely-not-there-python", "is not an executable regular file")},
		{map[string]string{"CODERUN_PYTHON_BIN": "definitely-not-there-python"}, line("CODERUN_PYTHON_BIN", "definitely-not-there-python", "does not resolve on PATH")},
	}
	for _, c := range exact {
		code, stderr := startupFailure(t, c.env, "")
		if code != 2 || stderr != c.want {
			t.Errorf("%v: exit %d, stderr %q\nwant %q", c.env, code, stderr, c.want)
		}
	}
	contains := []struct {
		python, want string
	}{
		{"/bin/echo", "did not report a CPython version"},
		{stub(t, dir, "py2", "echo 'cpython 2 99 0'"), "must be CPython 3.10 or newer, got cpython 2.99.0"},
		{stub(t, dir, "py39", "echo 'cpython 3 9 6'"), "must be CPython 3.10 or newer, got cpython 3.9.6"},
		{stub(t, dir, "pypy", "echo 'pypy 3 10 0'"), "must be CPython, got pypy"},
		{stub(t, dir, "exit7", "exit 7"), "failed the CPython version probe"},
	}
	for _, c := range contains {
		code, stderr := startupFailure(t, map[string]string{"CODERUN_PYTHON_BIN": c.python}, "")
		prefix := `coderun-rpc: configuration error: CODERUN_PYTHON_BIN="` + c.python + `": interpreter "` + c.python + `" `
		if code != 2 || !strings.HasPrefix(stderr, prefix) || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q, want ∋ %q", c.python, code, stderr, c.want)
		}
	}
}

// C223: a probe that traps SIGTERM and sleeps is killed at its deadline.
func TestProbeDeadline(t *testing.T) {
	t.Parallel()
	sleepy := stub(t, t.TempDir(), "sleepy", "trap '' TERM\nsleep 60")
	start := time.Now()
	code, stderr := startupFailure(t, map[string]string{"CODERUN_PYTHON_BIN": sleepy}, "")
	if code != 2 || !strings.Contains(stderr, "failed the CPython version probe") {
		t.Errorf("exit %d stderr %q", code, stderr)
	}
	if el := time.Since(start); el > 8*time.Second {
		t.Errorf("took %v", el)
	}
}

func limitsOf(t *testing.T, d *daemon) (map[string]int64, map[string]string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	var r struct {
		Capabilities struct {
			Limits map[string]int64  `json:"limits"`
			Python map[string]string `json:"python"`
		} `json:"capabilities"`
	}
	json.Unmarshal(d.events[0].m.Result, &r)
	return r.Capabilities.Limits, r.Capabilities.Python
}

// C8, C9, C10, C13 (accepted stubs): edge values start and are reported exactly.
func TestConfigurationAccepted(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_ADDRESS_SPACE_MB": "8589934591", "CODERUN_CPU_SECONDS": "9007199254740990",
		"CODERUN_WARM_POOL": "0", "CODERUN_RPC_BIN": "/ignored", "CODERUN_SOMETHING_ELSE": "x"})
	if l, _ := limitsOf(t, d); l["addressSpaceMb"] != 8589934591 || l["cpuSeconds"] != 9007199254740990 {
		t.Errorf("limits %v", l)
	}
	d = started(t, map[string]string{"CODERUN_MAX_VALUE_BYTES": "67108800", "CODERUN_ADDRESS_SPACE_MB": "4096", "CODERUN_WARM_POOL": "0"})
	if l, _ := limitsOf(t, d); l["maxValueBytes"] != 67108800 {
		t.Errorf("limits %v", l)
	}
	d = started(t, map[string]string{"GOMEMLIMIT": "128MiB", "GOGC": "10", "CODERUN_MAX_VALUE_BYTES": "52428800",
		"CODERUN_ADDRESS_SPACE_MB": "1024", "CODERUN_WARM_POOL": "0"})
	if l, _ := limitsOf(t, d); l["maxValueBytes"] != 52428800 {
		t.Errorf("limits %v", l)
	}
	dir := t.TempDir()
	four := stub(t, dir, "py4", "echo 'cpython 4 0 0'")
	d = started(t, map[string]string{"CODERUN_PYTHON_BIN": four, "CODERUN_WARM_POOL": "0"})
	if _, py := limitsOf(t, d); py["version"] != "4.0.0" || py["executable"] != four {
		t.Errorf("python %v", py)
	}
}

// C13 (relative stub), C17 and C19: paths resolved against the cwd, PATH
// entries that are empty, relative or directories skipped.
func TestInterpreterResolution(t *testing.T) {
	t.Parallel()
	d := t.TempDir()
	os.Mkdir(filepath.Join(d, "stubs"), 0o755)
	stub(t, filepath.Join(d, "stubs"), "python", "echo 'cpython 3 12 0'")
	dm := startIn(t, d, map[string]string{"CODERUN_PYTHON_BIN": "./stubs/python", "CODERUN_WARM_POOL": "0"})
	if _, py := limitsOf(t, dm); py["executable"] != filepath.Join(d, "stubs/python") || py["version"] != "3.12.0" {
		t.Errorf("relative stub: %v", py)
	}
	// C17: PATH=.::<real python dir>, a pypy stub named python3 in the cwd.
	stub(t, d, "python3", "echo 'pypy 3 10 0'")
	realDir := filepath.Dir(realPython)
	if filepath.Base(realPython) != "python3" {
		t.Skipf("real interpreter is %s, not python3", realPython)
	}
	dm = startIn(t, d, map[string]string{"PATH": ".::" + realDir, useDefaultPython: ""})
	expectOK(t, dm.run(prog("return 1")), "1")
	// C19: a directory named python3 on PATH is skipped.
	withDir := filepath.Join(t.TempDir(), "bin")
	os.MkdirAll(filepath.Join(withDir, "python3"), 0o755)
	dm = startIn(t, "", map[string]string{"PATH": withDir + ":" + realDir, useDefaultPython: ""})
	expectOK(t, dm.run(prog("return 1")), "1")
}

// startIn starts and initializes a daemon in working directory dir.
func startIn(t *testing.T, dir string, env map[string]string) *daemon {
	t.Helper()
	env[workDir] = dir
	return started(t, env)
}

// The example agent (make demo) runs against the built daemon.
func TestExampleAgent(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("python3", "../examples/agent.py")
	cmd.Env = environ(t, map[string]string{"CODERUN_RPC_BIN": daemonBin})
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"Gulbenkian Museum"`) || !strings.Contains(string(out), "daemon exited with 0") {
		t.Errorf("agent: %v\n%s", err, out)
	}
}

// --help lists every variable with its default; --version prints one line.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(daemonBin, "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"CODERUN_PYTHON_BIN", "CODERUN_CPU_SECONDS", "CODERUN_MAX_WALL_MS", "CODERUN_ADDRESS_SPACE_MB",
		"CODERUN_MAX_LOG_BYTES", "CODERUN_MAX_VALUE_BYTES", "CODERUN_GRACE_MS", "CODERUN_MAX_CONCURRENT_RUNS",
		"CODERUN_MAX_QUEUED_RUNS", "CODERUN_WARM_POOL", "CODERUN_ISOLATION", "CODERUN_LOG_LEVEL"} {
		if !strings.Contains(string(out), v) {
			t.Errorf("--help lacks %s", v)
		}
	}
	out, err = exec.Command(daemonBin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "coderun-rpc ") {
		t.Errorf("--version: %v %q", err, out)
	}
	cmd := exec.Command(daemonBin, "--check")
	cmd.Env = environ(t, map[string]string{"CODERUN_CPU_SECONDS": "0"})
	out, _ = cmd.Output()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), `CODERUN_CPU_SECONDS="0": must be a positive integer`) {
		t.Errorf("--check with a bad value: %d %s", cmd.ProcessState.ExitCode(), out)
	}
}

// A misspelled variable is one start-up warning naming the closest name, and
// a failure of --check; the daemon still serves with the default.
func TestMisspelledVariable(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CODERUN_MAX_WALLMS": "2000", "CODERUN_WARM_POOL": "0"}
	want := "CODERUN_MAX_WALLMS is not a coderun-rpc variable and is ignored; did you mean CODERUN_MAX_WALL_MS?"
	d := started(t, env)
	if !d.stderr.logged(want) {
		t.Errorf("no warning; stderr:\n%s", d.stderr)
	}
	cmd := exec.Command(daemonBin, "--check")
	cmd.Env = environ(t, env)
	out, _ := cmd.Output()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "configuration error: "+want) {
		t.Errorf("--check: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
}
