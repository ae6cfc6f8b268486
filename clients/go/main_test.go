package coderun_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// TestMain points CODERUN_RPC_BIN at a daemon (make exports it; else one is
// built for this run), so the tests and the Examples find it as a user's
// program would.
func TestMain(m *testing.M) {
	dir := ""
	if os.Getenv("CODERUN_RPC_BIN") == "" {
		var err error
		if dir, err = os.MkdirTemp("", "goclient-daemon-"); err != nil { // not coderun-*: see leakcheck.Suite
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		bin := filepath.Join(dir, "coderun-rpc")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/coderun-rpc/coderun-rpc/cmd/coderun-rpc").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the daemon: %v\n%s", err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
		os.Setenv("CODERUN_RPC_BIN", bin)
	}
	code := leakcheck.Suite(m)
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}
