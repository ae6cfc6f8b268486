//go:build linux

package spawn

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// What a short-lived helper (the interpreter probe, a sandbox feature probe)
// came to, as an error.

// ErrDeadline is wrapped by an error saying that a probe did not exit before
// its deadline.
var ErrDeadline = errors.New("deadline exceeded")

// WaitResult is a reaped probe's wait status, or why it could not be reaped.
type WaitResult struct {
	WS  unix.WaitStatus
	Err error
}

// ReapAsync reaps pid in a goroutine and delivers the result on the channel
// it returns (buffered: nobody needs to receive).
func ReapAsync(pid int) <-chan WaitResult {
	exited := make(chan WaitResult, 1)
	go func() { ws, _, err := Wait4(pid); exited <- WaitResult{ws, err} }()
	return exited
}

// ExitError describes how a probe ended: nil for exit 0, "exit status 7",
// "killed by signal SIGSEGV" followed by stderr (quoted, if any), or the
// reaping error.
func ExitError(exit WaitResult, stderr []byte) error {
	switch {
	case exit.Err != nil:
		return exit.Err
	case exit.WS.Signaled():
		return WithStderr(fmt.Errorf("killed by signal %s", SignalName(exit.WS.Signal())), stderr)
	case exit.WS.ExitStatus() != 0:
		return WithStderr(fmt.Errorf("exit status %d", exit.WS.ExitStatus()), stderr)
	}
	return nil
}

// WithStderr appends stderr, quoted, to err (nothing when stderr is empty).
func WithStderr(err error, stderr []byte) error {
	if len(stderr) == 0 {
		return err
	}
	return fmt.Errorf("%w (stderr: %q)", err, stderr)
}

// ReadBounded reads r to end of stream or error (a closed, abandoned pipe),
// keeping at most max bytes and draining the rest. It never returns nil.
func ReadBounded(r io.Reader, max int) []byte {
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
