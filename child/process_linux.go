//go:build linux

package child

import (
	"errors"
	"fmt"
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

	startTime uint64 // /proc/<pid>/stat field 22, when known
	hasStart  bool
	waited    atomic.Bool
	sandbox   *sandboxRun // StartSandboxed: Wait relays the program's status
	relay     chan Exit   // ForkServer.Spawn: the server reports the exit here
}

// Exit is a reaped child's wait status and rusage.
type Exit struct {
	Code     int    // exit code, -1 when signaled
	Signal   string // "SIGKILL" … when signaled, else ""
	Signaled bool
	CPU      time.Duration // user+system from wait4 rusage (includes reaped descendants)
	MaxRSSKb int64
}

// ErrWaited is returned by a second call to Wait.
var ErrWaited = errors.New("child: Wait already called")

// Start starts spec's program: fd 0 = /dev/null, fds 1/2 = pipes, fd 3 = the
// child's end of an AF_UNIX stream socketpair, a new session (pgid == pid) and
// a parent-death SIGKILL, and records the child's start time for SignalGroup.
// It sets no resource limits (the child applies its own).
//
// Only fds 0-3 reach the child: every daemon-side descriptor is created
// close-on-exec, and descriptors the daemon inherited without the flag are
// given it before the fork. The fork runs on the package's spawner thread,
// which lives as long as the daemon, so the parent-death signal fires when
// the daemon dies and not when the calling goroutine's thread exits.
//
// Errors leave nothing open: "fork/exec <path>: <errno>" (*os.PathError, so
// errors.Is(err, fs.ErrNotExist) etc. work; a missing Dir reports the same
// way) or "pipe2: …", "socketpair: …", "open /dev/null: …" (EMFILE …).
func Start(spec Spec) (*Process, error) {
	s, pid, err := startWired(spec, unix.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	p := &Process{Pid: pid, Conn: s.conn, Stdout: s.stdout, Stderr: s.stderr}
	p.startTime, p.hasStart = StartTime(pid)
	if p.hasStart {
		watchGroup(pid, p.startTime) // its descendants die with the daemon too
	}
	return p, nil
}

// startWired opens the child's fds 0-3 (fd 3 a socketpair of sockType),
// starts spec in its own session with a parent-death SIGKILL, and returns
// the daemon's ends. On error nothing is left open.
func startWired(spec Spec, sockType int) (*stdio, int, error) {
	s, err := openStdioSock(sockType)
	if err != nil {
		return nil, 0, err
	}
	pid, err := forkExec(spec.Path, append([]string{spec.Path}, spec.Args...), &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   append([]string{}, spec.Env...),
		Files: s.childFiles(),
		Sys:   &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	})
	s.closeChild()
	if err != nil {
		s.closeDaemon()
		return nil, 0, err
	}
	return s, pid, nil
}

// Wait blocks in wait4 until the child exits and returns its status and
// rusage. Call it once; a second call returns ErrWaited. Wait does not touch
// the pipes: read them to end of stream (or abandon them) separately.
func (p *Process) Wait() (Exit, error) {
	if !p.waited.CompareAndSwap(false, true) {
		return Exit{}, ErrWaited
	}
	if p.relay != nil {
		if e, ok := <-p.relay; ok {
			return e, nil
		}
		return Exit{}, fmt.Errorf("wait %d: %w", p.Pid, ErrForkServerDown)
	}
	ws, ru, err := wait4(p.Pid)
	if p.sandbox != nil {
		return p.sandbox.exit(ws, ru, err)
	}
	if err != nil {
		return Exit{}, err
	}
	return exitOf(ws, ru), nil
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
// empty group is no longer watched (see StartWatchdog).
func (p *Process) GroupEmpty() bool {
	if !p.groupEmpty() {
		return false
	}
	unwatchGroup(p.Pid)
	return true
}

func (p *Process) groupEmpty() bool { return !p.valid() || unix.Kill(-p.Pid, 0) == unix.ESRCH }

// valid guards the group calls: kill(-0) would signal the daemon's own
// process group and kill(-1) every process it may signal. A zero Process
// (or a test fake) signals nothing and has an empty group.
func (p *Process) valid() bool { return p.Pid > 1 }

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

func (p *Process) reused() bool {
	if !p.hasStart {
		return false
	}
	now, ok := StartTime(p.Pid)
	return ok && now != p.startTime
}

func wait4(pid int) (unix.WaitStatus, unix.Rusage, error) {
	var ws unix.WaitStatus
	var ru unix.Rusage
	for {
		_, err := unix.Wait4(pid, &ws, 0, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return ws, ru, fmt.Errorf("wait4 %d: %w", pid, err)
		}
		return ws, ru, nil
	}
}

func exitOf(ws unix.WaitStatus, ru unix.Rusage) Exit {
	e := Exit{
		Code:     ws.ExitStatus(),
		CPU:      time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		MaxRSSKb: ru.Maxrss,
	}
	if ws.Signaled() {
		e.Code, e.Signaled, e.Signal = -1, true, signalName(ws.Signal())
	}
	return e
}

// signalName is unix.SignalName with a fallback for the unnamed real-time
// signals, spelled as Python's signal module spells them.
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	const rtmin, rtmax = 34, 64
	switch {
	case sig == rtmin:
		return "SIGRTMIN"
	case sig == rtmax:
		return "SIGRTMAX"
	case sig > rtmin && sig < rtmax:
		return fmt.Sprintf("SIGRTMIN+%d", sig-rtmin)
	}
	return fmt.Sprintf("SIG%d", int(sig))
}

// stdio holds both ends of the child's fds 0-3 until the fork.
type stdio struct {
	conn, stdout, stderr *os.File // daemon ends
	devNull, out, errw   int      // child ends of fds 0, 1, 2
	sock                 int      // child end of fd 3
}

func openStdio() (*stdio, error) { return openStdioSock(unix.SOCK_STREAM) }

// openStdioSock is openStdio with fd 3 an AF_UNIX socketpair of sockType.
func openStdioSock(sockType int) (_ *stdio, err error) {
	s := &stdio{devNull: -1, out: -1, errw: -1, sock: -1}
	defer func() {
		if err != nil {
			s.closeChild()
			s.closeDaemon()
		}
	}()
	if s.devNull, err = openDevNull(); err != nil {
		return nil, err
	}
	if s.stdout, s.out, err = pipe("child-stdout"); err != nil {
		return nil, err
	}
	if s.stderr, s.errw, err = pipe("child-stderr"); err != nil {
		return nil, err
	}
	if s.conn, s.sock, err = socketpair("child-fd3", sockType); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *stdio) childFiles() []uintptr {
	return []uintptr{uintptr(s.devNull), uintptr(s.out), uintptr(s.errw), uintptr(s.sock)}
}

func (s *stdio) closeChild() {
	closeFds(s.devNull, s.out, s.errw, s.sock)
	s.devNull, s.out, s.errw, s.sock = -1, -1, -1, -1
}

func (s *stdio) closeDaemon() { closeFiles(s.conn, s.stdout, s.stderr) }
