//go:build linux

package sandbox

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"golang.org/x/sys/unix"
)

func TestRelayEncoding(t *testing.T) {
	ru := unix.Rusage{Maxrss: 1234}
	ru.Utime.Sec, ru.Utime.Usec, ru.Stime.Usec = 2, 500000, 250000
	ws, got, ok := decodeRelay(encodeRelay(unix.WaitStatus(9), ru))
	if !ok || ws != 9 || got.Utime != ru.Utime || got.Stime != ru.Stime || got.Maxrss != 1234 {
		t.Fatalf("round trip: %v %+v %v", ws, got, ok)
	}
	if _, _, ok := decodeRelay(make([]byte, relaySize)); ok {
		t.Fatal("a zero relay decoded")
	}
	if e := spawn.ExitOf(ws, got); e.Signal != "SIGKILL" || e.CPU != 2750*time.Millisecond {
		t.Fatalf("exit %+v", e)
	}
}

func TestMemberRecordEncoding(t *testing.T) {
	ru := unix.Rusage{Maxrss: 77}
	ru.Utime.Sec = 3
	for _, bound := range []bool{false, true} {
		b := encodeMember(42, bound, unix.WaitStatus(9), ru)
		pid, e, ok := decodeMember(b)
		if !ok || pid != 42 || e.Signal != "SIGKILL" || e.CPU != 3*time.Second || e.MaxRSSKb != 77 || e.CPUBound != bound {
			t.Fatalf("round trip: %d %+v %v", pid, e, ok)
		}
		if _, _, ok := decodeMember(b[:relaySize+8]); ok {
			t.Fatal("a short record decoded as a member's")
		}
		b[8] = 2
		if _, _, ok := decodeMember(b); ok {
			t.Fatal("a record with an unknown flag decoded")
		}
	}
}

func TestSandboxConfArgv(t *testing.T) {
	c := sandboxConf{rw: []string{"/r w"}, ro: []string{"/a=b", "/c"}, nproc: 3, nofile: 4, fsize: 5,
		cgroups: 2, memLimits: 1, session: true, prog: []string{"/py", "--", "x=y"}}
	a := c.argv(initArgv0)
	got, err := parseSandboxConf(a[1:])
	if err != nil || fmt.Sprint(got) != fmt.Sprint(c) {
		t.Fatalf("parse(%q) = %+v, %v", a, got, err)
	}
}

// A run's CPU budget is the lowest soft limit seen (a program raising its
// own cannot escape); a session's is the hard limit − 1, as its child moves
// the soft limit up before each run.
func TestCPUBudget(t *testing.T) {
	lowest := uint64(math.MaxUint64)
	for _, c := range []struct {
		soft, hard, want uint64
		session          bool
	}{
		{10, 11, 10, false},
		{11, 11, 10, false}, // raised to the hard limit: still the first soft
		{5, 11, 5, false},
		{10, 11, 5, false},
		{10, 3601, 3600, true},
		{20, 3601, 3600, true},
	} {
		if got := budgetOf(unix.Rlimit{Cur: c.soft, Max: c.hard}, &lowest, c.session); got != c.want {
			t.Errorf("budget of (%d, %d), session %v = %d, want %d", c.soft, c.hard, c.session, got, c.want)
		}
	}
}
