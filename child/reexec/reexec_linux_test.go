//go:build linux

package reexec_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/child/reexec"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

func TestMain(m *testing.M) {
	reexec.Dispatch()
	os.Exit(leakcheck.Suite(m))
}

// selfAs runs this test binary with argv[0] set to argv0 and stdin empty.
func selfAs(t *testing.T, argv0 string, args ...string) (string, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Args[0] = argv0
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDispatch: a process started under a helper's name becomes that helper
// (and never reaches the tests), any other returns from Dispatch.
func TestDispatch(t *testing.T) {
	leakcheck.Check(t)
	// The watchdog announces itself, reads its input (empty) and exits 0.
	if out, err := selfAs(t, "coderun-watchdog", "-test.run=^TestNothing$"); err != nil || out != "ready\n" {
		t.Errorf("as the watchdog: %q, %v; want \"ready\\n\", exit 0", out, err)
	}
	// A namespace probe of the sandbox exits 0 at once, printing nothing.
	if out, err := selfAs(t, "coderun-sandbox-probe", "-test.run=^TestNothing$"); err != nil || out != "" {
		t.Errorf("as a sandbox probe: %q, %v; want nothing, exit 0", out, err)
	}
	// The sandbox init refuses a configuration without "--".
	if out, err := selfAs(t, "coderun-sandbox-init", "nproc=x"); err == nil || !strings.HasPrefix(out, "coderun sandbox: init:") {
		t.Errorf("as a misconfigured sandbox init: %q, %v; want its own error", out, err)
	}
	// Under any other name the tests run.
	if out, err := selfAs(t, "plain", "-test.run=^TestNothing$", "-test.v"); err != nil || !strings.Contains(out, "--- PASS: TestNothing") {
		t.Errorf("as a plain process: %q, %v; want the tests to run", out, err)
	}
}

// TestNothing is what a re-executed binary that Dispatch returned from runs.
func TestNothing(t *testing.T) {}
