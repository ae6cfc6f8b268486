//go:build linux

package child

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// The second layer (ARCHITECTURE.md habit 9): a real CPython, when there is
// one, under its own RLIMIT_CPU dies by SIGXCPU, and Exit reports the signal
// by name with the CPU it burned.
func TestPythonSIGXCPU(t *testing.T) {
	leakcheck.Check(t)
	shim, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	// Resolve a version-manager shim as the daemon does: Probe runs with our
	// environment (which the shim needs) and reports the real interpreter.
	out, err := Probe(shim, []string{"-I", "-c", "import sys; print(sys.executable)"}, 5*time.Second, 1024)
	if err != nil {
		t.Fatalf("probe %s: %v", shim, err)
	}
	python := strings.TrimSpace(string(out))
	if !filepath.IsAbs(python) {
		t.Fatalf("probe %s: %q", shim, out)
	}
	p, err := Start(Spec{
		Path: python,
		Args: []string{"-I", "-c", "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (1, 2))\nwhile True: pass"},
		Env:  []string{leakcheck.Tag()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { discard(p) })
	e := waitExit(t, p, 20*time.Second)
	// The kernel enforces RLIMIT_CPU on its precise runtime clock; rusage's
	// user/system split is sampled and can read a little lower.
	if e.Signal != "SIGXCPU" || e.Code != -1 || e.CPU < 700*time.Millisecond {
		t.Errorf("Exit %+v, want SIGXCPU after about 1s CPU", e)
	}
}
