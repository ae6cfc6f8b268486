//go:build linux

package child

import (
	"errors"
	"os"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"golang.org/x/sys/unix"
)

// ForkChannel is the descriptors of a session child's fork
// (docs/child-protocol-sessions.md §6.3): two pipes and a stream socketpair, opened by
// the daemon. Conn, Stdout and Stderr are the daemon's ends, pollable like a
// Process's; Offer hands the child's ends (stdout-w, stderr-w, fd 3) to the
// source with the fork frame.
type ForkChannel struct {
	Conn, Stdout, Stderr *os.File
	st                   *spawn.Stdio
}

// ErrForkChannelSpent is returned by a second Offer.
var ErrForkChannelSpent = errors.New("child: the fork channel was already offered")

// OpenForkChannel opens a fork's descriptors. On error nothing is left open.
func OpenForkChannel() (*ForkChannel, error) {
	st, err := spawn.OpenStdio(unix.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	spawn.CloseFds(st.DevNull) // the fork keeps its source's fd 0
	st.DevNull = -1
	return &ForkChannel{Conn: st.Conn, Stdout: st.Stdout, Stderr: st.Stderr, st: st}, nil
}

// Offer writes frame (one whole fd-3 frame, newline included) to conn, the
// source child's fd 3, with SCM_RIGHTS [stdout-w, stderr-w, fd3] attached to
// its first byte (and after them each of extra, which the caller keeps and
// closes), then closes the daemon's copies of those child ends (also on
// error). The caller must be conn's only writer meanwhile; conn's write
// deadline bounds the call.
func (c *ForkChannel) Offer(conn *os.File, frame []byte, extra ...*os.File) error {
	if c.st == nil {
		return ErrForkChannelSpent
	}
	defer func() { c.st.CloseChild(); c.st = nil }()
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	fds := []int{c.st.Out, c.st.Errw, c.st.Sock}
	for _, f := range extra {
		fds = append(fds, int(f.Fd()))
	}
	rights := unix.UnixRights(fds...)
	var sendErr error
	err = raw.Write(func(fd uintptr) bool {
		for len(frame) > 0 {
			n, err := unix.SendmsgN(int(fd), frame, rights, nil, unix.MSG_NOSIGNAL)
			if err == unix.EAGAIN {
				return false // the poller waits for room (or the deadline)
			}
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				sendErr = os.NewSyscallError("sendmsg", err)
				return true
			}
			frame, rights = frame[n:], nil // the rights went with the first byte
		}
		return true
	})
	if err != nil {
		return err
	}
	return sendErr
}

// Close closes the daemon's ends and, if not yet offered, the child's.
func (c *ForkChannel) Close() {
	if c.st != nil {
		c.st.CloseChild()
		c.st = nil
	}
	spawn.CloseFiles(c.Conn, c.Stdout, c.Stderr)
}
