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

// A process the listing first missed (a member forked it between the
// listing and its own stop) is stopped too: a pass that finds every listed
// member stopped ends the freeze only once a listing taken after it shows
// no member it has not stopped.
func TestFreezeAllListsAgainAfterAllStopped(t *testing.T) {
	leakcheck.Check(t)
	var pids []int
	for range 2 {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		pids = append(pids, cmd.Process.Pid)
	}
	_ = unix.Kill(pids[0], unix.SIGSTOP) // the first listed stops at once
	for !stopped(pids[0]) {
		time.Sleep(time.Millisecond)
	}
	calls := 0
	f := FreezeAll(func() []int {
		calls++
		if calls == 1 {
			return pids[:1] // the second was forked after this listing
		}
		return pids
	})
	defer f.Thaw()
	if !stopped(pids[1]) {
		t.Fatalf("pid %d, missed by the first listing, runs after the freeze (%d listings)", pids[1], calls)
	}
}
