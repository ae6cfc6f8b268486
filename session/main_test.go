package session

import (
	"os"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/child/reexec"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// TestMain: tier sandbox re-executes this test binary as the sandbox init
// (sandbox.Start, sandbox.Probe), which reexec.Dispatch turns it into. The
// suite fails when it leaves anything named coderun-* in /tmp: every Manager
// stages its runs in a t.TempDir() (newTestManager).
func TestMain(m *testing.M) {
	reexec.Dispatch()
	os.Exit(leakcheck.Suite(m))
}
