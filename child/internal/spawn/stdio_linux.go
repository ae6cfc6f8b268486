//go:build linux

package spawn

import (
	"os"
	"syscall"
)

// Stdio holds both ends of a child's fds 0-3 until the fork.
type Stdio struct {
	Conn, Stdout, Stderr *os.File // daemon ends
	DevNull, Out, Errw   int      // child ends of fds 0, 1, 2
	Sock                 int      // child end of fd 3
}

// OpenStdio opens a child's fds 0-3: /dev/null, two pipes and an AF_UNIX
// socketpair of sockType (SOCK_STREAM, SOCK_SEQPACKET). On error nothing is
// left open.
func OpenStdio(sockType int) (_ *Stdio, err error) {
	s := &Stdio{DevNull: -1, Out: -1, Errw: -1, Sock: -1}
	defer func() {
		if err != nil {
			s.CloseChild()
			s.CloseDaemon()
		}
	}()
	if s.DevNull, err = OpenDevNull(); err != nil {
		return nil, err
	}
	if s.Stdout, s.Out, err = Pipe("child-stdout"); err != nil {
		return nil, err
	}
	if s.Stderr, s.Errw, err = Pipe("child-stderr"); err != nil {
		return nil, err
	}
	if s.Conn, s.Sock, err = Socketpair("child-fd3", sockType); err != nil {
		return nil, err
	}
	return s, nil
}

// ChildFiles is the child's fds 0-3, for syscall.ProcAttr.Files.
func (s *Stdio) ChildFiles() []uintptr {
	return []uintptr{uintptr(s.DevNull), uintptr(s.Out), uintptr(s.Errw), uintptr(s.Sock)}
}

// CloseChild closes the child's ends (idempotent).
func (s *Stdio) CloseChild() {
	CloseFds(s.DevNull, s.Out, s.Errw, s.Sock)
	s.DevNull, s.Out, s.Errw, s.Sock = -1, -1, -1, -1
}

// CloseDaemon closes the daemon's ends.
func (s *Stdio) CloseDaemon() { CloseFiles(s.Conn, s.Stdout, s.Stderr) }

// StartWired opens the child's fds 0-3 (fd 3 a socketpair of sockType),
// starts spec in its own session with a parent-death SIGKILL, and returns
// the daemon's ends. On error nothing is left open.
func StartWired(spec Spec, sockType int) (*Stdio, int, error) {
	s, err := OpenStdio(sockType)
	if err != nil {
		return nil, 0, err
	}
	pid, err := ForkExec(spec.Path, append([]string{spec.Path}, spec.Args...), &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   append([]string{}, spec.Env...),
		Files: s.ChildFiles(),
		Sys:   &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	})
	s.CloseChild()
	if err != nil {
		s.CloseDaemon()
		return nil, 0, err
	}
	return s, pid, nil
}
