package session

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// A session child is never reaped between runs, so wait4's rusage cannot
// measure one run: its CPU time and memory high-water mark are read from
// /proc instead, over the child's process tree (in tier sandbox the child
// is the sandbox's init and the interpreter its child).

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times (100 on every
// Linux architecture the daemon builds for).
const clockTick = 10 * time.Millisecond

// treeCPU is the CPU time (user + system) of pid and its descendants so
// far, reaped descendants included; ok is false when pid is gone.
func treeCPU(pid int) (cpu time.Duration, ok bool) {
	ticks, ok := statTicks(pid)
	if !ok {
		return 0, false
	}
	for _, c := range childPIDs(pid) {
		if d, ok := treeCPU(c); ok {
			cpu += d
		}
	}
	return cpu + time.Duration(ticks)*clockTick, true
}

// statTicks sums utime, stime, cutime and cstime of /proc/<pid>/stat.
func statTicks(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
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

// childPIDs lists the children of pid's main thread (one read, no
// directory listing: it runs twice per session run). A child started from
// another thread is counted once reaped (cutime), and always by the rusage
// that classifies the run.
func childPIDs(pid int) []int {
	p := strconv.Itoa(pid)
	b, _ := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	var out []int
	for _, f := range bytes.Fields(b) {
		if n, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// treeHWM is the largest VmHWM (kB) in pid's process tree.
func treeHWM(pid int) int64 {
	var hwm int64
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if _, rest, ok := bytes.Cut(b, []byte("VmHWM:")); ok {
		line, _, _ := bytes.Cut(rest, []byte("\n"))
		if f := bytes.Fields(line); len(f) > 0 {
			hwm, _ = strconv.ParseInt(string(f[0]), 10, 64)
		}
	}
	for _, c := range childPIDs(pid) {
		hwm = max(hwm, treeHWM(c))
	}
	return hwm
}

// sessionStats fills a kept session run's cpuMs (its share since base) and
// maxRssKb (the interpreter's high-water mark so far).
func sessionStats(s *protocol.Stats, pid int, base time.Duration) {
	if cpu, ok := treeCPU(pid); ok {
		s.CPUMs = max(cpu-base, 0).Milliseconds()
	}
	s.MaxRssKb = treeHWM(pid)
}

// interpreterPID is the session interpreter's pid: the child itself, or in
// tier sandbox the init's child, which the init (a Go program) may have
// started from any of its threads. Looked up once, when the session starts.
func interpreterPID(pid int, sandboxed bool) int {
	if !sandboxed {
		return pid
	}
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		if f := bytes.Fields(b); len(f) > 0 {
			if n, err := strconv.Atoi(string(f[0])); err == nil {
				return n
			}
		}
	}
	return pid
}
