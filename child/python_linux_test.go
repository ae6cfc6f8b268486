//go:build linux

package child

import (
	"os/exec"
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
	python := realPython(t)
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

// realPython resolves python3 (through a version-manager shim) or skips.
func realPython(t *testing.T) string {
	t.Helper()
	shim, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	out, err := Probe(shim, []string{"-I", "-c", "import sys; print(sys.executable)"}, 5*time.Second, 1024)
	if err != nil {
		t.Fatalf("probe %s: %v", shim, err)
	}
	return strings.TrimSpace(string(out))
}
