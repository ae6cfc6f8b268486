//go:build linux

package child

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrDeadline is wrapped by Probe's error when the probe did not exit before
// its deadline.
var ErrDeadline = errors.New("deadline exceeded")

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
	exited         chan waitResult
}

type waitResult struct {
	ws  unix.WaitStatus
	err error
}

func startProbe(path string, args []string, maxOut int) (*probe, error) {
	s, err := openStdio()
	if err != nil {
		return nil, err
	}
	s.conn.Close() // the probe gets no fd 3
	pid, err := forkExec(path, append([]string{path}, args...), &syscall.ProcAttr{
		Env:   syscall.Environ(),
		Files: s.childFiles()[:3],
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	s.closeChild()
	if err != nil {
		closeFiles(s.stdout, s.stderr)
		return nil, err
	}
	p := &probe{proc: &Process{Pid: pid}, stdout: s.stdout, stderr: s.stderr,
		out: make(chan []byte, 1), errOut: make(chan []byte, 1), exited: make(chan waitResult, 1)}
	p.proc.startTime, p.proc.hasStart = StartTime(pid)
	go func() { p.out <- readBounded(p.stdout, maxOut) }()
	go func() { p.errOut <- readBounded(p.stderr, stderrKept) }()
	go func() { ws, _, err := wait4(pid); p.exited <- waitResult{ws, err} }()
	return p, nil
}

// finish collects exit status and output until all three are in or the
// deadline passes, then cleans up.
func (p *probe) finish(deadline time.Duration) ([]byte, error) {
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	var out, errOut []byte
	var exit *waitResult
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
	closeFiles(p.stdout, p.stderr)
	p.proc.SignalGroup(syscall.SIGKILL)
	return out, probeError(exit, errOut)
}

// abandon is the deadline path: SIGKILL the group, close the pipes (which
// ends the readers with what they have), reap the leader if it was not.
func (p *probe) abandon(out, errOut []byte, exit *waitResult, deadline time.Duration) ([]byte, error) {
	p.proc.SignalGroup(syscall.SIGKILL)
	closeFiles(p.stdout, p.stderr)
	if out == nil {
		out = <-p.out
	}
	if errOut == nil {
		errOut = <-p.errOut
	}
	if exit != nil {
		return out, probeError(exit, errOut)
	}
	select {
	case <-p.exited:
	case <-time.After(probeReapWait):
	}
	return out, withStderr(fmt.Errorf("%w (%v), process group killed", ErrDeadline, deadline), errOut)
}

func probeError(exit *waitResult, errOut []byte) error {
	switch {
	case exit.err != nil:
		return exit.err
	case exit.ws.Signaled():
		return withStderr(fmt.Errorf("killed by signal %s", signalName(exit.ws.Signal())), errOut)
	case exit.ws.ExitStatus() != 0:
		return withStderr(fmt.Errorf("exit status %d", exit.ws.ExitStatus()), errOut)
	}
	return nil
}

func withStderr(err error, errOut []byte) error {
	if len(errOut) == 0 {
		return err
	}
	return fmt.Errorf("%w (stderr: %q)", err, errOut)
}

// readBounded reads r to end of stream or error (a closed, abandoned pipe),
// keeping at most max bytes and draining the rest. It never returns nil.
func readBounded(r io.Reader, max int) []byte {
	kept := []byte{}
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if room := max - len(kept); room > 0 {
			kept = append(kept, buf[:min(n, room)]...)
		}
		if err != nil {
			return kept
		}
	}
}
