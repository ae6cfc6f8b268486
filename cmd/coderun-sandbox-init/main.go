//go:build linux

// Command coderun-sandbox-init is the daemon's lean helper binary: the init
// of every tier-sandbox run (started directly, or exec'd by a sandboxed fork
// server's PID 1), the run's exec stage, the namespace probes, and the
// daemon's watchdog in either tier. It links child/reexec and what that
// needs, nothing of the daemon's RPC, schema, MCP, metrics or tracing
// packages, so starting it costs no package initialisation of theirs
// (docs/performance.md §11).
//
// The daemon carries it inside its own binary (child/sandbox/leaninit) and
// runs it from a sealed memory file; it is not meant to be started by hand.
package main

import (
	"fmt"
	"os"

	"github.com/coderun-rpc/coderun-rpc/child/reexec"
)

func main() {
	reexec.Dispatch()
	fmt.Fprintf(os.Stderr, "coderun-sandbox-init: %q is not a helper the daemon starts; the daemon starts this binary itself\n", os.Args[0])
	os.Exit(2)
}
