package session

import (
	"bytes"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// A session child is never reaped between runs, so wait4's rusage cannot
// measure one run: its CPU time and memory high-water mark are read from
// /proc instead, over the child's process tree (the interpreter's, in both
// tiers).

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times (100 on every
// Linux architecture the daemon builds for).
const clockTick = 10 * time.Millisecond

// treeUsage is the CPU time (user + system) of pid and its descendants so
// far, reaped descendants included, and, with hwm, the largest VmHWM (kB)
// in the tree, in one walk; ok is false when pid is gone.
func treeUsage(pid int, hwm bool) (cpu time.Duration, hwmKb int64, ok bool) {
	return usageOf(func(f procFile) ([]byte, bool) { return readProc(procPath(pid, f)) }, hwm)
}

// procFile is one of the /proc files of a process the statistics read.
type procFile int

const (
	procStat     procFile = iota // /proc/<pid>/stat
	procStatus                   // /proc/<pid>/status
	procChildren                 // /proc/<pid>/task/<pid>/children
	procFiles                    // how many
)

func procPath(pid int, f procFile) string {
	p := strconv.Itoa(pid)
	switch f {
	case procStat:
		return "/proc/" + p + "/stat"
	case procStatus:
		return "/proc/" + p + "/status"
	}
	return "/proc/" + p + "/task/" + p + "/children"
}

// usageOf is treeUsage of the process whose files read returns (a session's
// interpreter reads them through its held descriptors); its descendants'
// are read by path.
func usageOf(read func(procFile) ([]byte, bool), hwm bool) (cpu time.Duration, hwmKb int64, ok bool) {
	b, ok := read(procStat)
	ticks, ok := statTicks(b, ok)
	if !ok {
		return 0, 0, false
	}
	if hwm {
		b, _ := read(procStatus)
		hwmKb = vmHWM(b)
	}
	b, _ = read(procChildren)
	for _, c := range childPIDs(b) {
		if d, h, ok := treeUsage(c, hwm); ok {
			cpu += d
			hwmKb = max(hwmKb, h)
		}
	}
	return cpu + time.Duration(ticks)*clockTick, hwmKb, true
}

// statTicks sums utime, stime, cutime and cstime of a /proc/<pid>/stat
// read (ok: b was read).
func statTicks(b []byte, ok bool) (int64, bool) {
	if !ok {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold anything
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, false
	}
	var sum int64
	for _, k := range []int{11, 12, 13, 14} { // fields 14–17
		n, err := strconv.ParseInt(string(f[k]), 10, 64)
		if err != nil {
			return 0, false
		}
		sum += n
	}
	return sum, true
}

// readProc reads a /proc file with plain system calls: open, read until end
// of file, close. os.ReadFile also stats the file and tries (and fails) to
// register it with the poller. (A session's interpreter's own files are read
// through descriptors held open, held.go.)
func readProc(path string) ([]byte, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	b := make([]byte, 0, 4096)
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, len(b))
		}
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		switch {
		case err == syscall.EINTR:
		case err != nil:
			return b, false
		case n == 0:
			return b, true
		default:
			b = b[:len(b)+n]
		}
	}
}

// childPIDs lists the children of a process's main thread from its
// task/<pid>/children (one read, no directory listing: it runs twice per
// session run). A child started from another thread is counted once reaped
// (cutime), and always by the rusage that classifies the run.
func childPIDs(b []byte) []int {
	var out []int
	for _, f := range bytes.Fields(b) {
		if n, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// vmHWM is the VmHWM (kB) of a /proc/<pid>/status read, 0 when unknown.
func vmHWM(b []byte) int64 {
	_, rest, _ := bytes.Cut(b, []byte("VmHWM:"))
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	if f := bytes.Fields(line); len(f) > 0 {
		n, _ := strconv.ParseInt(string(f[0]), 10, 64)
		return n
	}
	return 0
}

// sessionStats fills a kept session run's cpuMs (its share since base) and
// maxRssKb (the interpreter's high-water mark so far), and returns the
// interpreter's CPU time now (the next run's base; base when unreadable).
func sessionStats(s *protocol.Stats, h *held, base time.Duration) time.Duration {
	cpu, hwm, ok := h.usage(true)
	if !ok {
		return base
	}
	s.CPUMs, s.MaxRssKb = max(cpu-base, 0).Milliseconds(), hwm
	return cpu
}
