package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func pyErr(t *testing.T, value string, probe ProbeFunc) (string, string, *Error) {
	t.Helper()
	var ce *Error
	abs, rule := locatePython(value)
	if rule != "" {
		return "", "", &Error{Var: VarPythonBin, Value: value, Rule: rule}
	}
	exe, ver, err := probePython(value, abs, probe)
	if err != nil && !errors.As(err, &ce) {
		t.Fatalf("%q: unexpected error %v", value, err)
	}
	return exe, ver, ce
}

// C12: explicit paths must be executable regular files.
func TestExplicitPath(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("x"), 0o644)
	for _, v := range []string{filepath.Join(dir, "missing"), noexec, dir, "./definitely-not-there-python"} {
		_, _, ce := pyErr(t, v, fakeProbe)
		if ce == nil || ce.Rule != "is not an executable regular file" || ce.Var != VarPythonBin || ce.Value != v {
			t.Errorf("%q: %v", v, ce)
		}
	}
}

// C13 with stub interpreters (real probe: the stubs are shell scripts).
func TestVersionProbeStubs(t *testing.T) {
	dir := t.TempDir()
	stub := func(name, line string) string { return writeStub(t, dir, name, "echo '"+line+"'") }
	cases := []struct{ path, want string }{
		{"/bin/echo", "did not report a CPython version"},
		{stub("py2", "cpython 2 99 0"), "must be CPython 3.10 or newer, got cpython 2.99.0"},
		{stub("py39", "cpython 3 9 6"), "must be CPython 3.10 or newer, got cpython 3.9.6"},
		{stub("pypy", "pypy 3 10 0"), "must be CPython, got pypy"},
		{writeStub(t, dir, "exit7", "exit 7"), "failed the CPython version probe"},
	}
	for _, c := range cases {
		_, _, ce := pyErr(t, c.path, defaultProbe)
		if ce == nil || !strings.Contains(ce.Rule, c.want) || !strings.Contains(ce.Rule, `interpreter "`+c.path+`"`) {
			t.Errorf("%s: got %v, want ∋ %q", c.path, ce, c.want)
		}
	}
	four := stub("py4", "cpython 4 0 0")
	exe, ver, ce := pyErr(t, four, defaultProbe)
	if ce != nil || exe != four || ver != "4.0.0" {
		t.Errorf("4.0.0 stub: %q %q %v", exe, ver, ce)
	}
	// A relative stub path is made absolute lexically against the cwd.
	os.Mkdir(filepath.Join(dir, "stubs"), 0o755)
	rel := writeStub(t, filepath.Join(dir, "stubs"), "python", "echo 'cpython 3 12 0'")
	t.Chdir(dir)
	exe, ver, ce = pyErr(t, "./stubs/python", defaultProbe)
	if ce != nil || exe != rel || ver != "3.12.0" {
		t.Errorf("relative stub: %q %q %v", exe, ver, ce)
	}
	// A symlink stays as named (lexical resolution).
	os.Symlink(filepath.Join(dir, "stubs"), filepath.Join(dir, "D"))
	exe, _, ce = pyErr(t, "D/python", defaultProbe)
	if ce != nil || exe != filepath.Join(dir, "D/python") {
		t.Errorf("symlinked dir: %q %v", exe, ce)
	}
}

// Shim resolution follows the probe's second line only when it names an
// executable regular file by an absolute path.
func TestShimResolution(t *testing.T) {
	dir := t.TempDir()
	real := writeStub(t, dir, "real", "true")
	shim := writeStub(t, dir, "shim", "true")
	for second, want := range map[string]string{real + "\n": real, "relative\n": shim,
		dir + "\n": shim, "": shim, real: shim /* incomplete line */} {
		probe := func(string, []string, time.Duration, int) ([]byte, error) {
			return []byte("cpython 3 11 7\n" + second), nil
		}
		exe, _, ce := pyErr(t, shim, probe)
		if ce != nil || exe != want {
			t.Errorf("second line %q: got %q (%v), want %q", second, exe, ce, want)
		}
	}
}

// C17 / C19: PATH search skips empty and relative entries and directories.
func TestPathSearch(t *testing.T) {
	dir := t.TempDir()
	writeStub(t, dir, "python3", "echo 'pypy 3 10 0'")
	dirs := filepath.Join(t.TempDir(), "d")
	os.MkdirAll(filepath.Join(dirs, "python3"), 0o755)
	good := t.TempDir()
	want := writeStub(t, good, "python3", "echo 'cpython 3 11 0'")
	t.Chdir(dir)
	t.Setenv("PATH", ".::"+dirs+":"+good)
	exe, ver, ce := pyErr(t, "python3", defaultProbe)
	if ce != nil || exe != want || ver != "3.11.0" {
		t.Errorf("got %q %q %v, want %q", exe, ver, ce, want)
	}
	t.Setenv("PATH", ".:"+dirs)
	if _, _, ce := pyErr(t, "python3", defaultProbe); ce == nil || ce.Rule != "does not resolve on PATH" {
		t.Errorf("unresolvable: %v", ce)
	}
}

// C223: a probe that traps SIGTERM and sleeps is killed at the deadline.
func TestProbeDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 5 s")
	}
	dir := t.TempDir()
	stub := writeStub(t, dir, "sleepy", "trap '' TERM\nsleep 60")
	start := time.Now()
	_, _, ce := pyErr(t, stub, defaultProbe)
	if ce == nil || !strings.Contains(ce.Rule, "failed the CPython version probe") {
		t.Errorf("got %v", ce)
	}
	if el := time.Since(start); el > 8*time.Second || el < 4*time.Second {
		t.Errorf("elapsed %v", el)
	}
}

// C223 [unit]: the probe is run with -I -c, a 5000 ms deadline and 1 KiB.
func TestProbeArguments(t *testing.T) {
	var gotArgs []string
	var gotDeadline time.Duration
	var gotMax int
	probe := func(p string, a []string, d time.Duration, m int) ([]byte, error) {
		gotArgs, gotDeadline, gotMax = a, d, m
		return []byte("cpython 3 11 0\n"), nil
	}
	pyErr(t, "/bin/sh", probe)
	if len(gotArgs) != 3 || gotArgs[0] != "-I" || gotArgs[1] != "-c" || gotDeadline != 5*time.Second || gotMax != 1024 {
		t.Errorf("args %q deadline %v max %d", gotArgs, gotDeadline, gotMax)
	}
}

// The real interpreter behind the pyenv shim is found.
func TestRealPython(t *testing.T) {
	exe, ver, ce := pyErr(t, "python3", defaultProbe)
	if ce != nil {
		t.Skipf("no python3 here: %v", ce)
	}
	if !filepath.IsAbs(exe) || !strings.HasPrefix(ver, "3.") || strings.Contains(exe, "shims") {
		t.Errorf("python3 resolved to %q %q", exe, ver)
	}
}
