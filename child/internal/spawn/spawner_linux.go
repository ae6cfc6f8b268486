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
// exits, not when the daemon does (CHILD-CONTRACT Appendix B item 2). Every
// fork therefore happens on one goroutine that locks its thread and never
// returns, so that thread lives exactly as long as the daemon.
//
// The goroutine is started on the first fork, not at package initialisation:
// importing the package starts nothing. It lives from then on, so a test's
// leak check sees it in the baseline of every test after the first fork; a
// test that checks for leaks and is the first to fork calls Warm first.

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
)

// Warm starts the spawner thread (and the runtime poller) if it is not
// running yet. ForkExec does so itself; Warm lets a caller do it at a moment
// of its choosing (before a leak check's baseline, under no fd pressure).
func Warm() {
	startSpawner.Do(func() {
		initPoller()
		go spawner(forkRequests)
	})
}

// initPoller makes the runtime create its network poller now, before the
// first fork's pipes. It is created on first use, and failing to create it
// (EMFILE) is a fatal runtime error: the first pollable descriptor must not
// be a Start's pipe under descriptor pressure.
func initPoller() {
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
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
	Warm()
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
