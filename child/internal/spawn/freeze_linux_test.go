//go:build linux

package spawn

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// A member a pass found stopped and that another member (one not stopped
// yet) continues before the freeze ends is stopped again by the next pass:
// a family cannot keep one of its processes running through its freeze by
// sending it SIGCONT.
func TestFreezePassStopsAContinuedMember(t *testing.T) {
	leakcheck.Check(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	f := &Frozen{members: map[int]uint64{}}
	for !f.stopPass([]int{pid}) {
		time.Sleep(time.Millisecond)
	}
	_ = unix.Kill(pid, unix.SIGCONT) // what a sibling not yet stopped may do
	for stopped(pid) {
		time.Sleep(time.Millisecond)
	}
	f.stopPass([]int{pid})
	for deadline := time.Now().Add(10 * time.Second); !stopped(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d, continued during the freeze, was not stopped again by the next pass", pid)
		}
	}
}
