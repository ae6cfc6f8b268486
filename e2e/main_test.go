// Package e2e drives the built coderun-rpc binary over its stdio, as a client
// would (TEST-CATALOGUE.md [daemon] cases, lifecycle, queue, streaming).
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/internal/mcptest"
)

var (
	daemonBin string
	// realPython is the interpreter behind python3 (a pyenv shim here is a
	// bash script that can take seconds under load, so parallel daemons are
	// pointed at the real binary; TestDefaultPython covers the default).
	realPython string
)

func TestMain(m *testing.M) {
	// Started by start as the launcher of a daemon under namespace limits.
	if limit := os.Getenv(nsLimitVar); limit != "" {
		execUnderNamespaceLimit(limit)
	}
	// Started by mcp_test.go as an upstream MCP server, this binary serves.
	mcptest.MaybeServe()
	dir, err := os.MkdirTemp("", "e2e-daemon-") // not coderun-*: see leakcheck.Suite
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	daemonBin = filepath.Join(dir, "coderun-rpc")
	if err := buildDaemon(daemonBin); err != nil {
		fmt.Fprintln(os.Stderr, "building the daemon:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	out, err := exec.Command("python3", "-I", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "python3:", err)
		os.Exit(1)
	}
	realPython = strings.TrimSpace(string(out))
	code := leakcheck.Suite(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildDaemon builds the daemon as `make build` does, with the sandbox's lean
// helper embedded (so tier sandbox runs as it ships), and with -race when
// this test binary has it.
func buildDaemon(out string) error {
	gobuild := func(env []string, args ...string) error {
		cmd := exec.Command("go", append([]string{"build"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	const helper = "github.com/coderun-rpc/coderun-rpc/cmd/coderun-sandbox-init"
	if err := gobuild([]string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags", "-s -w",
		"-o", "../child/sandbox/leaninit/coderun-sandbox-init", helper); err != nil {
		return err
	}
	args := []string{"-tags", "sandboxinit", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	return gobuild(nil, append(args, "github.com/coderun-rpc/coderun-rpc/cmd/coderun-rpc")...)
}
