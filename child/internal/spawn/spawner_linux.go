//go:build linux

package spawn

import (
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A child's parent-death signal fires when the OS *thread* that forked it
// exits, not when the daemon does (docs/child-protocol.md Appendix B item 2). Every
// fork therefore happens on one goroutine that locks its thread and never
// returns, so that thread lives exactly as long as the daemon.
//
// The goroutine is started on first use (a fork or a pollable descriptor),
// not at package initialisation: importing the package starts nothing. It
// lives from then on (leakcheck knows it). A daemon starts it early, by
// starting its watchdog; Warm does so explicitly.

type forkRequest struct {
	path string
	argv []string
	attr *syscall.ProcAttr
	done chan<- forkResult
}

type forkResult struct {
	pid int
	err error
}

var (
	forkRequests = make(chan forkRequest)
	startSpawner sync.Once

	pollerMu sync.Mutex
	pollerUp bool
)

// Warm starts the spawner thread and the runtime poller if they are not
// running yet, at a moment of the caller's choosing (under no descriptor
// pressure). ForkExec starts the spawner itself, and Pollable calls Warm.
func Warm() error {
	startSpawner.Do(func() { go spawner(forkRequests) })
	return ensurePoller()
}

// pollerFds is how many free descriptors creating the poller takes: the pipe
// that triggers it, the epoll descriptor and the runtime's wake-up eventfd.
const pollerFds = 4

// ensurePoller makes the runtime create its network poller, with a pipe of
// its own, before the first pollable descriptor of this package. The runtime
// creates it on first use, and failing to create it (EMFILE) is a fatal
// runtime error: the first pollable descriptor must not be a Start's pipe
// under descriptor pressure. So the descriptors it needs are checked to be
// free first; when they are not, the error (EMFILE) is returned, the caller
// makes no pollable descriptor, and the next use tries again.
func ensurePoller() error {
	pollerMu.Lock()
	defer pollerMu.Unlock()
	if pollerUp {
		return nil
	}
	if err := reserveFds(pollerFds); err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	r.Close()
	w.Close()
	pollerUp = true
	return nil
}

// reserveFds reports whether n descriptors can be opened now, by opening
// and closing them.
func reserveFds(n int) error {
	fds := make([]int, 0, n)
	defer func() { CloseFds(fds...) }()
	for range n {
		fd, err := OpenDevNull()
		if err != nil {
			return err
		}
		fds = append(fds, fd)
	}
	return nil
}

// spawner runs forever on its locked OS thread; it is never unlocked, so the
// thread is never handed back to the scheduler and never exits before the
// process does.
func spawner(reqs <-chan forkRequest) {
	runtime.LockOSThread()
	for r := range reqs {
		cloexecInherited()
		pid, err := syscall.ForkExec(r.path, r.argv, r.attr)
		r.done <- forkResult{pid, err}
	}
}

// ForkExec runs syscall.ForkExec on the spawner thread, starting it on first
// use. ForkExec returns only after the exec succeeded or failed, so a non-nil
// error (*os.PathError "fork/exec <path>") means no child runs.
func ForkExec(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	startSpawner.Do(func() { go spawner(forkRequests) })
	done := make(chan forkResult, 1)
	forkRequests <- forkRequest{path, argv, attr, done}
	r := <-done
	if r.err != nil {
		return 0, &os.PathError{Op: "fork/exec", Path: path, Err: r.err}
	}
	return r.pid, nil
}

// cloexecInherited marks every descriptor above 2 close-on-exec. Go creates
// its own descriptors close-on-exec, but the daemon may have inherited some
// without it from whoever started it (a client, a shell, a CI runner), and
// ForkExec passes every descriptor lacking the flag on to the child — where
// it would outlive the run and could hold a client's pipe open. The flag
// changes nothing for the daemon itself. The child's fds 0-3 are dup2'd by
// ForkExec after this and are unaffected.
func cloexecInherited() {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return
	}
	cloexecByProcFd() // kernels before 5.11
}

func cloexecByProcFd() {
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}
