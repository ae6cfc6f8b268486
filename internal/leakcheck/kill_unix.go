//go:build unix

package leakcheck

import (
	"os"
	"syscall"
	"time"
)

// killAll SIGKILLs leaked processes that are still the same process (same
// start time), and reaps those that are this binary's children.
func killAll(leaked []procKey) {
	for _, k := range leaked {
		st, ok := readStat(k.pid)
		if !ok || st.start != k.start {
			continue
		}
		syscall.Kill(k.pid, syscall.SIGKILL)
		if st.ppid == os.Getpid() {
			reap(k.pid)
		}
	}
}

func reap(pid int) {
	var ws syscall.WaitStatus
	for i := 0; i < 100; i++ {
		if n, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); n == pid || (err != nil && err != syscall.EINTR) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
