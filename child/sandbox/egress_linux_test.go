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
