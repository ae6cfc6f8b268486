//go:build linux

package spawn

import (
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Wait4 reaps pid (retrying on EINTR) and returns its wait status and rusage.
func Wait4(pid int) (unix.WaitStatus, unix.Rusage, error) {
	var ws unix.WaitStatus
	var ru unix.Rusage
	for {
		_, err := unix.Wait4(pid, &ws, 0, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return ws, ru, fmt.Errorf("wait4 %d: %w", pid, err)
		}
		return ws, ru, nil
	}
}

// ExitOf is the Exit of wait status ws and rusage ru.
func ExitOf(ws unix.WaitStatus, ru unix.Rusage) Exit {
	e := Exit{
		Code:     ws.ExitStatus(),
		CPU:      time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		MaxRSSKb: ru.Maxrss,
	}
	if ws.Signaled() {
		e.Code, e.Signaled, e.Signal = -1, true, SignalName(ws.Signal())
	}
	return e
}

// SignalName is unix.SignalName with a fallback for the unnamed real-time
// signals, spelled as Python's signal module spells them.
func SignalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	const rtmin, rtmax = 34, 64
	switch {
	case sig == rtmin:
		return "SIGRTMIN"
	case sig == rtmax:
		return "SIGRTMAX"
	case sig > rtmin && sig < rtmax:
		return fmt.Sprintf("SIGRTMIN+%d", sig-rtmin)
	}
	return fmt.Sprintf("SIG%d", int(sig))
}
