//go:build linux

package watchdog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The watchdog process (see watchdog_linux.go): this binary re-executed with
// argv[0] "coderun-watchdog". HelperMain, called through reexec.Dispatch as
// the first statement of main (or TestMain), takes over and never returns.

const (
	// watchdogPruneEvery is how often the watchdog forgets groups that are
	// gone, so its set stays small and a recycled id is never signalled.
	watchdogPruneEvery = time.Second
	// secondKillAfter spaces the two kill passes after the daemon is gone.
	secondKillAfter = 50 * time.Millisecond
	// maxWatchedGroups bounds the watchdog's set. A daemon has far fewer
	// live process groups (runs are bounded by its configuration); a record
	// beyond it is dropped after a prune failed to make room.
	maxWatchedGroups = 1 << 16
	// maxWatchedDirs likewise bounds its directories (one per live run or
	// warm child, and the fork server's); one beyond it is left to the next
	// daemon's start-up sweep.
	maxWatchedDirs = 1 << 16
)

// HelperMain runs the watchdog process, and does not return, when argv[0]
// names it; otherwise it returns at once. reexec.Dispatch calls it.
func HelperMain(argv []string) {
	if len(argv) > 0 && argv[0] == watchdogArgv0 {
		runWatchdog(os.Stdin)
	}
}

// runWatchdog keeps the sets of groups and directories that the records
// read from in describe and, when in ends, kills the groups left, then
// removes the directories left. It never returns.
func runWatchdog(in io.Reader) {
	// Ignored, not caught: a signal meant for the daemon (a terminal's, a
	// supervisor's) must not end the watchdog before the daemon; SIGHUP also
	// comes with the SIGCONT that wakes a stopped, newly orphaned watchdog.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	unix.Write(1, []byte(watchdogReady))
	records := make(chan record)
	go readRecords(in, records)
	groups, dirs := groupSet{}, dirSet{}
	prune := time.NewTicker(watchdogPruneEvery)
	for {
		select {
		case r, ok := <-records:
			if !ok {
				killRemaining(groups)
				// After the kills: a killed program writes nothing more.
				for _, err := range dirs.removeAll() {
					fmt.Fprintf(os.Stderr, "%s: %v\n", watchdogArgv0, err)
				}
				unix.Exit(0) // not os.Exit: a race-enabled binary would sleep first
			}
			if r.dir != "" {
				dirs.apply(r)
			} else {
				groups.apply(r)
			}
		case <-prune.C:
			groups.prune()
		}
	}
}

// apply records r, a directory's record, in the set.
func (s dirSet) apply(r record) {
	if !r.watch {
		delete(s, r.dir)
	} else if len(s) < maxWatchedDirs {
		s[r.dir] = struct{}{}
	}
}

// apply records r, a group's record, in the set.
func (s groupSet) apply(r record) {
	if !r.watch {
		delete(s, r.pgid)
		return
	}
	if _, known := s[r.pgid]; !known && len(s) >= maxWatchedGroups {
		if s.prune(); len(s) >= maxWatchedGroups {
			return
		}
	}
	s[r.pgid] = r.start
}

// readRecords sends every well-formed record read from in and closes out at
// end of input. A line longer than maxRecordLen or malformed is skipped; a
// read error counts as the end (the daemon can no longer be heard), and so
// does a last line without its newline.
func readRecords(in io.Reader, out chan<- record) {
	defer close(out)
	r := bufio.NewReaderSize(in, maxRecordLen)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if err := skipLine(r); err != nil {
				return
			}
			continue
		}
		if err != nil {
			return
		}
		if rec, ok := parseRecord(line); ok {
			out <- rec
		}
	}
}

// skipLine discards the rest of an overlong line.
func skipLine(r *bufio.Reader) error {
	for {
		_, err := r.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// killRemaining SIGKILLs every group left and, if there was one, does it
// again shortly after, for a member that was forking when the first signal
// came. It does not wait for the groups to empty: their dead members are
// reaped by whoever inherits them, which may take its time (PID 1 of a
// container reaping lazily).
func killRemaining(groups groupSet) {
	if groups.kill() > 0 {
		time.Sleep(secondKillAfter)
		groups.kill()
	}
}
