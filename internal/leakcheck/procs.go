package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// procs returns this binary's direct children and every other process whose
// environment carries Tag().
func procs() map[procKey]bool {
	m := map[procKey]bool{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return m
	}
	self := os.Getpid()
	tag := []byte(Tag())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		st, ok := readStat(pid)
		if ok && (st.ppid == self || tagged(pid, tag)) {
			m[procKey{pid, st.start}] = true
		}
	}
	return m
}

type stat struct {
	comm  string
	state string
	ppid  int
	start uint64
}

func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	return parseStat(b)
}

// parseStat reads fields 2 (comm), 3, 4 and 22 of /proc/<pid>/stat; the
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
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return stat{}, false
	}
	return stat{comm: string(b[open+1 : close]), state: string(f[0]), ppid: ppid, start: start}, true
}

func tagged(pid int, tag []byte) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, tag) {
			return true
		}
	}
	return false
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
