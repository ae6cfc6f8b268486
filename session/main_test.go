package session

import (
	"os"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/child/reexec"
)

// TestMain: tier sandbox re-executes this test binary as the sandbox init
// (sandbox.Start, sandbox.Probe), which reexec.Dispatch turns it into.
func TestMain(m *testing.M) {
	reexec.Dispatch()
	os.Exit(m.Run())
}
