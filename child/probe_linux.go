//go:build linux

package child

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"golang.org/x/sys/unix"
)

// ErrDeadline is wrapped by Probe's error when the probe did not exit before
// its deadline.
var ErrDeadline = spawn.ErrDeadline

// probeReapWait bounds how long Probe waits, after the deadline's SIGKILL,
// for the probe leader to be reaped (it can only be slower than that in
// uninterruptible sleep; then a goroutine reaps it later).
const probeReapWait = 2 * time.Second

// stderrKept bounds the stderr excerpt quoted in Probe's errors.
const stderrKept = 200

// Probe runs path with args (argv[0] = path) with the caller's environment
// and working directory, stdin /dev/null, in its own process group with a
// parent-death SIGKILL, and returns at most maxOut bytes of its stdout
// (the rest is drained and discarded).
//
// At the deadline the process group is SIGKILLed and stdout/stderr are
// abandoned, so a descendant that escaped the group while holding a pipe
// cannot stall the caller. The error describes a non-zero exit ("exit status
// 7"), a signal ("killed by signal SIGSEGV") or the deadline (wrapping
// ErrDeadline), followed by up to 200 bytes of stderr, quoted. A leader that
// exited 0 before the deadline is a success even if a descendant kept the
// pipes open until the deadline. On return, whatever is left of the probe's
// process group is SIGKILLed.
func Probe(path string, args []string, deadline time.Duration, maxOut int) ([]byte, error) {
	r, err := startProbe(path, args, maxOut)
	if err != nil {
		return nil, err
	}
	return r.finish(deadline)
}

type probe struct {
	proc           *Process
	stdout, stderr *os.File
	out, errOut    chan []byte // one value each, at end of stream or abandonment
	exited         <-chan spawn.WaitResult
}

func startProbe(path string, args []string, maxOut int) (*probe, error) {
	s, err := spawn.OpenStdio(unix.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	s.Conn.Close() // the probe gets no fd 3
	pid, err := spawn.ForkExec(path, append([]string{path}, args...), &syscall.ProcAttr{
		Env:   syscall.Environ(),
		Files: s.ChildFiles()[:3],
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	s.CloseChild()
	if err != nil {
		spawn.CloseFiles(s.Stdout, s.Stderr)
		return nil, err
	}
	p := &probe{proc: spawn.Started(pid, nil, nil, nil), stdout: s.Stdout, stderr: s.Stderr,
		out: make(chan []byte, 1), errOut: make(chan []byte, 1), exited: spawn.ReapAsync(pid)}
	go func() { p.out <- spawn.ReadBounded(p.stdout, maxOut) }()
	go func() { p.errOut <- spawn.ReadBounded(p.stderr, stderrKept) }()
	return p, nil
}

// finish collects exit status and output until all three are in or the
// deadline passes, then cleans up.
func (p *probe) finish(deadline time.Duration) ([]byte, error) {
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	var out, errOut []byte
	var exit *spawn.WaitResult
	for pending := 3; pending > 0; pending-- {
		select {
		case out = <-p.out:
		case errOut = <-p.errOut:
		case w := <-p.exited:
			exit = &w
		case <-timer.C:
			return p.abandon(out, errOut, exit, deadline)
		}
	}
	spawn.CloseFiles(p.stdout, p.stderr)
	p.proc.SignalGroup(syscall.SIGKILL)
	return out, spawn.ExitError(*exit, errOut)
}

// abandon is the deadline path: SIGKILL the group, close the pipes (which
// ends the readers with what they have), reap the leader if it was not.
func (p *probe) abandon(out, errOut []byte, exit *spawn.WaitResult, deadline time.Duration) ([]byte, error) {
	p.proc.SignalGroup(syscall.SIGKILL)
	spawn.CloseFiles(p.stdout, p.stderr)
	if out == nil {
		out = <-p.out
	}
	if errOut == nil {
		errOut = <-p.errOut
	}
	if exit != nil {
		return out, spawn.ExitError(*exit, errOut)
	}
	select {
	case <-p.exited:
	case <-time.After(probeReapWait):
	}
	return out, spawn.WithStderr(fmt.Errorf("%w (%v), process group killed", ErrDeadline, deadline), errOut)
}
