//go:build linux

package child_test

import (
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/childtest"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// The second layer (CONTRIBUTING.md habit 9): a real CPython, when there is
// one, that dies by SIGXCPU (default disposition, as when its soft
// RLIMIT_CPU fires) is reported by signal name with its rusage.
func TestPythonSIGXCPU(t *testing.T) {
	leakcheck.Check(t)
	python := childtest.RealPython(t)
	p, err := child.Start(child.Spec{
		Path: python,
		Args: []string{"-I", "-c", "import os, signal\nx = sum(range(3_000_000))\nos.kill(os.getpid(), signal.SIGXCPU)"},
		Env:  []string{leakcheck.Tag()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { childtest.Discard(p) })
	e := childtest.WaitExit(t, p, 20*time.Second)
	if e.Signal != "SIGXCPU" || !e.Signaled || e.Code != -1 || e.CPU <= 0 || e.MaxRSSKb <= 0 {
		t.Errorf("child.Exit %+v, want SIGXCPU with some CPU and RSS", e)
	}
}
