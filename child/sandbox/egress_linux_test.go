//go:build linux

package sandbox

import (
	"os"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// TestC820ListenInNetworkNeverOnTheHost: a pid in the daemon's own network
// namespace (a recycled pid, here the test itself) gets no listener.
func TestC820ListenInNetworkNeverOnTheHost(t *testing.T) {
	leakcheck.Check(t)
	f, err := ListenInNetwork(os.Getpid())
	if err == nil {
		f.Close()
		t.Fatal("a listener was made in the daemon's own network namespace")
	}
	if !strings.Contains(err.Error(), "daemon's network namespace") {
		t.Fatalf("error %v, want one naming the daemon's namespace", err)
	}
}

// TestC1272TakeListenerOnlyFromARunsInit: TakeListener refuses a process
// that is no run's init nor a member's parent one (the test itself, whose
// parent is in the daemon's namespace) and the daemon's own PID 1.
func TestC1272TakeListenerOnlyFromARunsInit(t *testing.T) {
	leakcheck.Check(t)
	for _, pid := range []int{os.Getpid(), 1} {
		f, err := TakeListener(pid)
		if err == nil {
			f.Close()
			t.Fatalf("pid %d: a descriptor was taken", pid)
		}
		if !strings.Contains(err.Error(), "is not a run's init") {
			t.Errorf("pid %d: error %v, want one saying it is not a run's init", pid, err)
		}
	}
}
