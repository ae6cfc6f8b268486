//go:build linux

package spawn

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// An idle session's interpreter is frozen (docs/containment-start-modes.md §4.3): its
// process group and every descendant of it — a child that left the group
// with setsid() included, as long as it is a descendant — are stopped with
// SIGSTOP, which no program can catch, block or ignore, and continued with
// SIGCONT. Descendants are found by their parent links
// (/proc/<pid>/task/*/children), so a process stopped while it forks leaves
// a child the next pass finds; Freeze returns once a pass finds every
// process stopped. SIGKILL ends a stopped process like any other, so the
// kill paths need nothing more.

// freezeWait bounds Freeze's wait for the tree to be seen stopped (a task
// that stays in the kernel; its SIGSTOP is pending and takes effect when it
// returns to user mode).
var freezeWait = 2 * time.Second

// The pause between two passes of Freeze starts at freezePoll (a signalled
// task stops as soon as it is scheduled) and doubles up to freezePollMax, so
// a task that does not stop costs the daemon a few hundred /proc reads, not
// a busy loop.
const (
	freezePoll    = 100 * time.Microsecond
	freezePollMax = 10 * time.Millisecond
)

// Frozen is a set of processes Freeze or FreezeAll stopped: a group and
// each process by pid and start time, so that Thaw continues exactly those,
// wherever they have been reparented since, and never a process that reused
// a pid.
type Frozen struct {
	pgid    int            // the group stopped as a whole; 0 for none
	members map[int]uint64 // pid → start time
	hook    func(frozen bool)
}

// SetFreezeHook makes p's Freeze call hook(true) once p's tree is stopped,
// and its Thaw hook(false) before it continues it: for a member of a
// family whose other processes follow the members' state (a session's
// namespace, session_linux.go). Call it before p is shared.
func SetFreezeHook(p *Process, hook func(frozen bool)) { p.freezeHook = hook }

// SetFamily makes p's Family list's result: for a member of a family whose
// processes share what p may write (a session's namespace,
// session_linux.go). Call it before p is shared.
func SetFamily(p *Process, list func() []int) { p.family = list }

// Family lists the processes that may write where p writes: p's tree, or
// what SetFamily gave. A sample: processes come and go meanwhile.
func (p *Process) Family() []int {
	if p.family != nil {
		return p.family()
	}
	return Tree(p.Pid)
}

// Freeze stops p's process group and every descendant of p and returns once
// each of them is seen stopped (or freezeWait has passed). nil when p is
// gone or its pid was reused: there is nothing to thaw.
func (p *Process) Freeze() *Frozen {
	if !p.valid() || p.reused() {
		return nil
	}
	_ = unix.Kill(-p.Pid, unix.SIGSTOP)
	f := FreezeAll(func() []int { return Tree(p.Pid) })
	f.pgid, f.hook = p.Pid, p.freezeHook
	if f.hook != nil {
		f.hook(true)
	}
	return f
}

// FreezeAll stops every process list returns, calling list again until a
// pass finds every one of them stopped and a listing taken after it shows
// no process the freeze has not stopped (or freezeWait has passed): a
// member may fork between a listing and its own stop, and the child, not
// listed, would run on; once every member is stopped none can fork, so
// the listing after is complete.
func FreezeAll(list func() []int) *Frozen {
	f := &Frozen{members: map[int]uint64{}}
	deadline := time.Now().Add(freezeWait)
	for pause := freezePoll; !(f.stopPass(list()) && f.covers(list())) && time.Now().Before(deadline); pause = min(2*pause, freezePollMax) {
		time.Sleep(pause)
	}
	return f
}

// covers reports whether every live process of pids is a member f has
// recorded (same start time) and found stopped.
func (f *Frozen) covers(pids []int) bool {
	for _, pid := range pids {
		start, ok := StartTime(pid)
		if !ok {
			continue // gone meanwhile
		}
		if known, seen := f.members[pid]; !seen || known != start || !stopped(pid) {
			return false
		}
	}
	return true
}

// stopPass stops every process of pids that is new to f (a task in an
// uninterruptible sleep included: its SIGSTOP takes effect as it leaves the
// kernel) or that it does not find stopped (one another member, not stopped
// yet, continued with SIGCONT since the last pass), and reports whether
// every one of them was found stopped.
func (f *Frozen) stopPass(pids []int) bool {
	all := true
	for _, pid := range pids {
		start, ok := StartTime(pid)
		if !ok {
			continue // gone meanwhile
		}
		known, seen := f.members[pid]
		f.members[pid] = start
		if !seen || known != start || !stopped(pid) {
			_ = unix.Kill(pid, unix.SIGSTOP)
		}
		if !stopped(pid) {
			all = false
		}
	}
	return all
}

// Thaw continues what Freeze stopped: the group, and each recorded member
// still alive with its recorded start time. A nil Frozen thaws nothing.
func (f *Frozen) Thaw() {
	if f == nil {
		return
	}
	if f.hook != nil {
		f.hook(false)
	}
	if start, ok := StartTime(f.pgid); f.pgid > 1 && (!ok || start == f.members[f.pgid]) {
		_ = unix.Kill(-f.pgid, unix.SIGCONT)
	}
	for pid, start := range f.members {
		if now, ok := StartTime(pid); ok && now == start {
			_ = unix.Kill(pid, unix.SIGCONT)
		}
	}
}

// Tree lists root and its descendants, parents before their children, as
// the parent links of /proc show them now.
func Tree(root int) []int {
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, Children(out[i])...)
	}
	return out
}

// Children lists the children of every thread of pid.
func Children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range bytes.Fields(b) {
			if n, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// stopped reports whether every task (thread) of pid is stopped, traced,
// dead or in an uninterruptible sleep: none of them can run or fork any
// more. A task in an uninterruptible sleep (a vfork parent waiting for its
// stopped child, say) has its SIGSTOP pending: it stops as it leaves the
// kernel, and a fork it is in aborts (the kernel restarts it after the
// signal).
func stopped(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return true // gone
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue
		}
		switch taskState(b) {
		case 'T', 't', 'Z', 'X', 'x', 'D':
		default:
			return false
		}
	}
	return true
}

// taskState is field 3 of a /proc stat line (0 when unparsable). Fields are
// counted after the last ')': the command name may contain anything.
func taskState(stat []byte) byte {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}
