package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// procs maps every process on the machine but this one to its stat.
func procs() map[procKey]stat {
	m := map[procKey]stat{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return m
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if st, ok := readStat(pid); ok {
			m[procKey{pid, st.start}] = st
		}
	}
	return m
}

// ProcessesWith returns the live (not zombie) processes on the machine, this
// one aside, whose command line contains marker: a test names a process it
// cannot otherwise find from the host (one inside another PID namespace, one
// that escaped with setsid) by a marker argument it starts it with.
func ProcessesWith(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmd, []byte(marker)) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ours reports whether a process is this binary's direct child or carries
// Tag() in its environment.
func ours(pid int, st stat) bool {
	return !st.kernelThread() && (st.ppid == os.Getpid() || tagged(pid, []byte(Tag())))
}

type stat struct {
	comm  string
	state string
	ppid  int
	flags uint64
	start uint64
}

// pfKthread is the kernel's PF_KTHREAD process flag.
const pfKthread = 0x00200000

// kernelThread reports whether the process is a kernel thread, which has no
// environment and is never a test's leak.
func (s stat) kernelThread() bool { return s.flags&pfKthread != 0 }

func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	return parseStat(b)
}

// parseStat reads fields 2 (comm), 3, 4, 9 and 22 of /proc/<pid>/stat; the
// comm may contain spaces and parentheses, so fields count after the last ')'.
func parseStat(b []byte) (stat, bool) {
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return stat{}, false
	}
	f := bytes.Fields(b[close+1:])
	if len(f) < 20 {
		return stat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	flags, err2 := strconv.ParseUint(string(f[6]), 10, 64)
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return stat{}, false
	}
	return stat{comm: string(b[open+1 : close]), state: string(f[0]), ppid: ppid, flags: flags, start: start}, true
}

// tagged reports whether pid's environment carries tag. A process in the
// middle of execve reads as an empty environment for a moment (its new memory
// map is in place before its strings are), so an empty read of a live process
// is tried again a few times before it counts as untagged: a leak caught
// mid-exec would otherwise pass as no leak at all.
func tagged(pid int, tag []byte) bool {
	env := environ(pid)
	for try := 0; len(env) == 0 && try < 5 && alive(pid); try++ {
		time.Sleep(time.Millisecond)
		env = environ(pid)
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, tag) {
			return true
		}
	}
	return false
}

func environ(pid int) []byte {
	env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return env
}

// alive reports whether pid exists and is not a zombie (whose environment
// is gone for good).
func alive(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.state != "Z"
}

func describe(pid int) string {
	st, ok := readStat(pid)
	if !ok {
		return fmt.Sprintf("%d (gone)", pid)
	}
	cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	cmd = bytes.ReplaceAll(bytes.TrimRight(cmd, "\x00"), []byte{0}, []byte{' '})
	return fmt.Sprintf("%d (%s) state %s ppid %d: %s", pid, st.comm, st.state, st.ppid, cmd)
}
