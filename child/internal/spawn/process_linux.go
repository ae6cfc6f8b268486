//go:build linux

package spawn

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec describes one child.
type Spec struct {
	Path string   // executable, absolute (also argv[0]; a relative one resolves in Dir)
	Args []string // argv[1:]
	Env  []string // exact environment; nil means an empty one
	Dir  string   // working directory; "" means the daemon's
}

// Process is a started child. Conn, Stdout and Stderr are the daemon's ends,
// close-on-exec and registered with the runtime poller (deadlines work, Close
// releases a blocked Read or Write); the caller closes them.
type Process struct {
	Pid    int
	Conn   *os.File // daemon end of the fd-3 socketpair
	Stdout *os.File // read end of fd 1
	Stderr *os.File // read end of fd 2

	startTime  uint64 // /proc/<pid>/stat field 22, when known
	hasStart   bool
	waited     atomic.Bool
	reap       func() (Exit, error) // Wait's work when not wait4 (SetReap)
	adopter    func(pid int) (*Process, error)
	freezeHook func(frozen bool) // SetFreezeHook
	family     func() []int      // SetFamily
}

// Exit is a reaped child's wait status and rusage.
type Exit struct {
	Code     int    // exit code, -1 when signaled
	Signal   string // "SIGKILL" … when signaled, else ""
	Signaled bool
	CPU      time.Duration // user+system from wait4 rusage (includes reaped descendants)
	MaxRSSKb int64
	// CPUBound: the sandbox init of a session's namespace killed it for the
	// family's lifetime CPU total (a member's record, session_linux.go).
	CPUBound bool
}

// ErrWaited is returned by a second call to Wait.
var ErrWaited = errors.New("child: Wait already called")

// Started is the Process of a child just forked as pid, with the daemon's
// ends of its descriptors (any may be nil). It records the child's start
// time, the guard of SignalGroup against pid reuse.
func Started(pid int, conn, stdout, stderr *os.File) *Process {
	p := &Process{Pid: pid, Conn: conn, Stdout: stdout, Stderr: stderr}
	p.startTime, p.hasStart = StartTime(pid)
	return p
}

// Leader is the Process of the group pgid whose leader started at start
// (clock ticks, /proc/<pid>/stat field 22): a child another process forked
// (a fork server's), or a watched group.
func Leader(pgid int, start uint64) *Process {
	return &Process{Pid: pgid, startTime: start, hasStart: true}
}

// SetReap makes p.Wait return reap's result instead of reaping p with
// wait4: for a child the daemon does not reap itself (a fork server's), or
// whose status another process relays (a sandbox init's program). Call it
// before p is shared.
func SetReap(p *Process, reap func() (Exit, error)) { p.reap = reap }

// SetAdopter gives p an Adopt method: adopt claims a fork of p's program
// that its reaper took in (a fork server's, a sandbox init's). Call it
// before p is shared.
func SetAdopter(p *Process, adopt func(pid int) (*Process, error)) { p.adopter = adopt }

// ErrNotAdoptable is returned by Adopt for a child whose reaper cannot
// adopt its forks (a child started directly, without a fork server).
var ErrNotAdoptable = errors.New("child: this child's forks cannot be adopted (it was not started by the fork server)")

// Adoptable reports whether Adopt can succeed at all (p has an adopter).
func (p *Process) Adoptable() bool { return p.adopter != nil }

// Adopt claims pid, a fork of p's program that p's reaper has taken in, as
// a Process of its own (see forkserver.Server.Adopt).
func (p *Process) Adopt(pid int) (*Process, error) {
	if p.adopter == nil {
		return nil, ErrNotAdoptable
	}
	return p.adopter(pid)
}

// WrapReap makes p.Wait return around(reap) instead, where reap is what
// p.Wait would have done: for a forked child whose status another process
// relays (a sandboxed fork server's init). Call it before p is shared.
func WrapReap(p *Process, around func(reap func() (Exit, error)) (Exit, error)) {
	reap := p.reap
	if reap == nil {
		reap = p.wait4
	}
	p.reap = func() (Exit, error) { return around(reap) }
}

// Wait blocks in wait4 until the child exits and returns its status and
// rusage. Call it once; a second call returns ErrWaited. Wait does not touch
// the pipes: read them to end of stream (or abandon them) separately.
func (p *Process) Wait() (Exit, error) {
	if !p.waited.CompareAndSwap(false, true) {
		return Exit{}, ErrWaited
	}
	if p.reap != nil {
		return p.reap()
	}
	return p.wait4()
}

// wait4 reaps p itself.
func (p *Process) wait4() (Exit, error) {
	ws, ru, err := Wait4(p.Pid)
	if err != nil {
		return Exit{}, err
	}
	return ExitOf(ws, ru), nil
}

// SignalGroup sends sig to the child's process group (-pgid). The leader's
// start time is re-read first: present and different from the recorded one
// means the pid was reused, and the signal is withheld; absent (leader reaped)
// means the signal proceeds, reaching any surviving group member. ESRCH (and
// any other kill error) is ignored. A Process with Pid <= 1 signals nothing.
func (p *Process) SignalGroup(sig syscall.Signal) {
	if !p.valid() || p.reused() {
		return
	}
	_ = unix.Kill(-p.Pid, sig)
}

// GroupEmpty reports whether the child's process group has no member left
// (kill(-pgid, 0) fails with ESRCH). An unreaped leader still counts. An
// empty group is no longer watched (see Watcher).
func (p *Process) GroupEmpty() bool {
	if !p.groupEmpty() {
		return false
	}
	unwatch(p.Pid)
	return true
}

// Terminate starts the os/exec-style escalation: SIGTERM to the group now,
// SIGKILL to the group after grace (at once when grace <= 0). The returned
// stop function cancels the pending SIGKILL and reports whether it did so
// (false once it has fired), like time.Timer.Stop.
func (p *Process) Terminate(grace time.Duration) (stop func() bool) {
	if grace <= 0 {
		p.SignalGroup(syscall.SIGKILL)
		return func() bool { return false }
	}
	p.SignalGroup(syscall.SIGTERM)
	return time.AfterFunc(grace, func() { p.SignalGroup(syscall.SIGKILL) }).Stop
}

// GroupGone reports whether p's group has no member left, or its id now
// names another group: a live leader with another start time means the pid
// was recycled, which the kernel does only once the old group has no
// member. Unlike GroupEmpty it does not unwatch the group.
func GroupGone(p *Process) bool { return p.reused() || p.groupEmpty() }

func (p *Process) groupEmpty() bool { return !p.valid() || unix.Kill(-p.Pid, 0) == unix.ESRCH }

// valid guards the group calls: kill(-0) would signal the daemon's own
// process group and kill(-1) every process it may signal. A zero Process
// (or a test fake) signals nothing and has an empty group.
func (p *Process) valid() bool { return p.Pid > 1 }

func (p *Process) reused() bool {
	if !p.hasStart {
		return false
	}
	now, ok := StartTime(p.Pid)
	return ok && now != p.startTime
}
