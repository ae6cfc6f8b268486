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
// one, that dies by SIGXCPU (default disposition, as when its soft
// RLIMIT_CPU fires) is reported by signal name with its rusage.
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
		Args: []string{"-I", "-c", "import os, signal\nx = sum(range(3_000_000))\nos.kill(os.getpid(), signal.SIGXCPU)"},
		Env:  []string{leakcheck.Tag()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { discard(p) })
	e := waitExit(t, p, 20*time.Second)
	if e.Signal != "SIGXCPU" || !e.Signaled || e.Code != -1 || e.CPU <= 0 || e.MaxRSSKb <= 0 {
		t.Errorf("Exit %+v, want SIGXCPU with some CPU and RSS", e)
	}
}
