//go:build linux

// Package reexec runs this binary's helper processes. The sandbox init (and
// its exec stage and namespace probes) and the watchdog are this same binary
// re-executed with a marker argv[0]; Dispatch, called as the first statement
// of main — and of the TestMain of every test binary that starts a sandbox or
// a watchdog — recognises such a process and turns it into the helper before
// anything else of the program runs.
//
// Nothing happens at package initialisation: a binary that does not call
// Dispatch never becomes a helper (the same shape as runc's init and moby's
// reexec, made explicit).
package reexec

import (
	"os"

	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
	"github.com/coderun-rpc/coderun-rpc/child/watchdog"
)

// Dispatch runs the helper that os.Args[0] names and never returns, or
// returns at once when this process was not started as a helper.
func Dispatch() {
	sandbox.HelperMain(os.Args)
	watchdog.HelperMain(os.Args)
}
