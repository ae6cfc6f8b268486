//go:build linux

// Command coderun-sandbox-init is the sandbox's lean helper binary: the init
// of every tier-sandbox run (started directly, or exec'd by a sandboxed fork
// server's PID 1), the run's exec stage and the namespace probes. It links
// child/sandbox and what that needs, nothing of the daemon's RPC, schema,
// MCP, metrics or tracing packages, so starting it costs no package
// initialisation of theirs (docs/performance.md §11).
//
// The daemon carries it inside its own binary (child/sandbox/leaninit) and
// runs it from a sealed memory file; it is not meant to be started by hand.
package main

import (
	"fmt"
	"os"

	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
)

func main() {
	sandbox.HelperMain(os.Args)
	fmt.Fprintf(os.Stderr, "coderun-sandbox-init: %q is not a sandbox stage; the daemon starts this binary itself\n", os.Args[0])
	os.Exit(2)
}
