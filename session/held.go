package session

import (
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// held is what a session keeps open for its child's whole life, so that a
// run does not open them by path again (bench/history-2026-12.md §12): the
// working directory, where out/ is made empty before each run and looked at
// after it, and the interpreter's three /proc files every run's statistics
// read (procstat.go). A /proc descriptor follows the process it was opened
// on: a pid reused after the child is gone cannot redirect it. A descriptor
// that could not be opened is -1 and its reads go by path, as a fresh run's
// do. Reads and close
// hold mu, so a descriptor number is never read once closed (and reused).
type held struct {
	w    *worker // the child the descriptors are of
	pid  int
	mu   sync.Mutex
	dir  int
	proc [procFiles]int
	buf  []byte // getdents; guarded by mu
}

// openHeld opens w's directory and pid's /proc files.
func openHeld(w *worker, pid int) *held {
	h := &held{w: w, pid: pid, buf: make([]byte, 1024)}
	h.dir, _ = w.wd.Dup()
	for f := range procFiles {
		h.proc[f] = openFD(procPath(pid, procFile(f)), 0)
	}
	return h
}

func openFD(path string, flags int) int {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|flags, 0)
	if err != nil {
		return -1
	}
	return fd
}

// close closes every descriptor (again: nothing); later reads go by path.
func (h *held) close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, fd := range append([]int{h.dir}, h.proc[:]...) {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}
	h.dir = -1
	for f := range h.proc {
		h.proc[f] = -1
	}
}

// readProc reads the interpreter's /proc file f from offset 0 (a /proc file
// is produced anew by each read from its start).
func (h *held) readProc(f procFile) ([]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fd := h.proc[f]
	if fd < 0 {
		return readProc(procPath(h.pid, f))
	}
	for size := 4096; ; size *= 2 {
		b := make([]byte, size)
		n, err := syscall.Pread(fd, b, 0)
		for err == syscall.EINTR {
			n, err = syscall.Pread(fd, b, 0)
		}
		switch {
		case err != nil || n == 0: // a process that is gone reads as nothing
			return nil, false
		case n < size:
			return b[:n], true
		}
	}
}

// usage is treeUsage of the interpreter, its own files read through h.
func (h *held) usage(hwm bool) (cpu time.Duration, hwmKb int64, ok bool) {
	return usageOf(h.readProc, hwm)
}

// resetOut is resetOut of the session's directory: an out/ that already is
// an empty 0700 folder is seen through the held directory in five system
// calls; anything else goes the long way.
func (h *held) resetOut() error {
	if empty, plain := h.outState(); empty && plain {
		return nil
	}
	return resetOut(h.w.wd)
}

// outEmpty reports whether w's out/ is a folder without entries (so a
// collection finds no files), seen through the held directory; false when
// w is not the session's child or out/ is anything else.
func (h *held) outEmpty(w *worker) bool {
	if h == nil || w != h.w {
		return false
	}
	empty, _ := h.outState()
	return empty
}

// outState opens out/ under the held directory without following a link
// and reports whether it is a folder with no entries, and whether its mode
// is 0700 exactly (no other permission or special bit).
func (h *held) outState() (empty, plain bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dir < 0 {
		return false, false
	}
	return outStateAt(h.dir, h.buf)
}

// outStateAt is outState of out/ under the directory dirfd; buf is for
// getdents.
func outStateAt(dirfd int, buf []byte) (empty, plain bool) {
	fd, err := syscall.Openat(dirfd, protocol.OutDir,
		syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false, false
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return false, false
	}
	plain = st.Mode&0o7777 == 0o700
	for {
		n, err := syscall.Getdents(fd, buf)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return false, plain
		}
		if n == 0 {
			return true, plain
		}
		if _, count, _ := syscall.ParseDirent(buf[:n], 1, nil); count > 0 {
			return false, plain
		}
	}
}
