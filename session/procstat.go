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

// treeCPU is the CPU time (user + system) of pid and its descendants so
// far, reaped descendants included; ok is false when pid is gone.
func treeCPU(pid int) (cpu time.Duration, ok bool) {
	cpu, _, ok = treeUsage(pid, false)
	return cpu, ok
}

// treeUsage is treeCPU and, with hwm, the largest VmHWM (kB) in the tree,
// in one walk.
func treeUsage(pid int, hwm bool) (cpu time.Duration, hwmKb int64, ok bool) {
	ticks, ok := statTicks(pid)
	if !ok {
		return 0, 0, false
	}
	if hwm {
		hwmKb = vmHWM(pid)
	}
	for _, c := range childPIDs(pid) {
		if d, h, ok := treeUsage(c, hwm); ok {
			cpu += d
			hwmKb = max(hwmKb, h)
		}
	}
	return cpu + time.Duration(ticks)*clockTick, hwmKb, true
}

// statTicks sums utime, stime, cutime and cstime of /proc/<pid>/stat.
func statTicks(pid int) (int64, bool) {
	b, ok := readProc("/proc/" + strconv.Itoa(pid) + "/stat")
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
// register it with the poller, which doubles the calls of the three reads
// every session run ends with.
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

// childPIDs lists the children of pid's main thread (one read, no
// directory listing: it runs twice per session run). A child started from
// another thread is counted once reaped (cutime), and always by the rusage
// that classifies the run.
func childPIDs(pid int) []int {
	p := strconv.Itoa(pid)
	b, _ := readProc("/proc/" + p + "/task/" + p + "/children")
	var out []int
	for _, f := range bytes.Fields(b) {
		if n, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// vmHWM is pid's VmHWM (kB), 0 when unknown.
func vmHWM(pid int) int64 {
	b, _ := readProc("/proc/" + strconv.Itoa(pid) + "/status")
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
func sessionStats(s *protocol.Stats, pid int, base time.Duration) time.Duration {
	cpu, hwm, ok := treeUsage(pid, true)
	if !ok {
		return base
	}
	s.CPUMs, s.MaxRssKb = max(cpu-base, 0).Milliseconds(), hwm
	return cpu
}
