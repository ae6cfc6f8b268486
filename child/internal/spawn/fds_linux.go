//go:build linux

package spawn

import (
	"os"

	"golang.org/x/sys/unix"
)

// Descriptor helpers. Every descriptor is created close-on-exec in the same
// system call, so no concurrent fork (of this package or of os/exec) can
// inherit it. The daemon's ends are made non-blocking before os.NewFile so
// they join the runtime poller: deadlines work and Close releases a blocked
// Read or Write. The child's ends stay blocking.

// Pipe returns a pollable read end and the raw, blocking write end.
func Pipe(name string) (*os.File, int, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, -1, os.NewSyscallError("pipe2", err)
	}
	r, err := Pollable(p[0], name)
	if err != nil {
		unix.Close(p[1])
		return nil, -1, err
	}
	return r, p[1], nil
}

// Socketpair returns the daemon's pollable end and the child's raw end of an
// AF_UNIX socketpair of sockType (SOCK_STREAM, SOCK_SEQPACKET).
func Socketpair(name string, sockType int) (*os.File, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, sockType|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, os.NewSyscallError("socketpair", err)
	}
	f, err := Pollable(fds[0], name)
	if err != nil {
		unix.Close(fds[1])
		return nil, -1, err
	}
	return f, fds[1], nil
}

// Pollable wraps fd in a non-blocking *os.File; on failure fd is closed.
// The runtime poller is made to exist first (see Warm).
func Pollable(fd int, name string) (*os.File, error) {
	if err := Warm(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setnonblock", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// OpenDevNull opens /dev/null read-only, close-on-exec.
func OpenDevNull() (int, error) {
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: os.DevNull, Err: err}
	}
	return fd, nil
}

// CloseFds closes each fd that is not negative.
func CloseFds(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// CloseFiles closes each file that is not nil.
func CloseFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
