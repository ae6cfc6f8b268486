//go:build linux

package watchdog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"golang.org/x/sys/unix"
)

// The watchdog makes "a crashed daemon leaves no child behind" (docs/containment.md §2–§3) hold
// for the whole process group of a run, not just for the run's process.
// Pdeathsig reaches only the daemon's direct children; a grandchild in the
// run's group (subprocess.Popen) is reparented and survives a daemon killed
// by SIGKILL, whose group kills never run.
//
//	daemon ──fork/exec exe "coderun-watchdog"──► watchdog
//	  │   own process group; SIGINT/TERM/HUP/PIPE ignored, then "ready" on
//	  │   fd 1; no parent-death signal; fd 0 = read end of a pipe, fd 2 = stderr
//	  │
//	  ├─ Start:      "w <pgid> <start>\n" ─┐  one write under a mutex; only
//	  ├─ GroupEmpty: "u <pgid>\n"         ─┤  the daemon holds the write end
//	  │                                    ▼  (close-on-exec)
//	  │            watchdog: its own copy of the set; every second it drops
//	  │            the groups that are gone (empty, or id recycled)
//	  │
//	  ├─ rundir.Create: "d <quoted path>\n"  likewise for the directories
//	  ├─ rundir.Remove: "f <quoted path>\n"  the daemon creates
//	  ▼
//	daemon dies (any cause) or stops it ──► EOF ──► watchdog SIGKILLs every
//	  group still registered (start-time guard), once more 50 ms later if
//	  there was one (a fork in flight), then removes every directory still
//	  registered (rundir.RemoveTree: no symbolic link followed), and exits 0
//
// Tier sandbox needs none of this (killing the namespace's init takes every
// descendant, and the init has a parent-death signal); sandbox.Start does
// not register.

const watchdogArgv0 = "coderun-watchdog"

// Tunables; variables so tests can shorten them.
var (
	// watchdogWriteTimeout bounds a registration's write. The watchdog reads
	// continuously, so a full pipe (64 KiB, ~2000 records) means it is stopped
	// or wedged: it is SIGKILLed and replaced.
	watchdogWriteTimeout = 2 * time.Second
	// watchdogRestartGap: a watchdog that dies sooner than this after its
	// start is not replaced at once (no respawn loop) but at the next
	// registration.
	watchdogRestartGap = time.Second
	// watchdogStopTimeout bounds stop's wait for the watchdog's exit.
	watchdogStopTimeout = 5 * time.Second
	// watchdogStartTimeout bounds the wait for a new watchdog's readiness.
	watchdogStartTimeout = 10 * time.Second
)

// watchdogReady is what a watchdog writes on its fd 1 once it ignores the
// signals it must survive and reads its input.
const watchdogReady = "ready\n"

// minPruneAt is the daemon-side set's size below which it is never pruned.
const minPruneAt = 64

// Start starts the daemon's watchdog: the binary exe (whose main calls
// reexec.Dispatch or HelperMain first; /proc/self/exe for this one)
// started in its own process group, which outlives the daemon. The daemon
// passes its lean helper binary (sandbox.HelperPath), whose start costs a
// fraction of its own. From then on
// child.Start and a fork server's Spawn register every new child's process
// group with it, and Process.GroupEmpty returning true unregisters it. When the daemon dies,
// however it dies (SIGKILL included), the watchdog SIGKILLs every group still
// registered — so a run's same-group descendants die with the daemon — and
// exits. A group whose id was recycled is never signalled.
//
// Directories are registered likewise (rundir.Create, rundir.Remove): those
// still registered when the daemon dies are removed after the kills.
//
// Cost: one small process per daemon, one pipe write (~30 bytes) per spawn
// and per emptied group, one (~80 bytes) per directory created and per
// directory removed, and a /proc read plus a kill(pgid, 0) per watched group
// per second in the watchdog.
//
// stop closes the watchdog's input: it kills whatever is still registered
// (normally nothing: by then the daemon has settled every run), exits, and is
// reaped. stop waits at most a few seconds (then SIGKILLs the watchdog), is
// idempotent, returns an error when the watchdog did not exit 0, and makes
// registration a no-op again. Only one watchdog runs at a time: a second
// Start before stop fails. Without a watchdog (unit tests of other packages,
// --help, --version), registration is a no-op. The binary must call
// reexec.Dispatch first thing in main (or TestMain) for the watchdog to run.
//
// A watchdog that dies while the daemon lives (someone killed it) is replaced
// at once and told every group still registered; one that died within a
// second of its start is replaced at the next registration instead. report
// (which may be nil, and must not register groups) receives each such event
// and each failure to replace it. Registration itself never fails; it costs
// one write, which waits at most 2 s (a wedged watchdog, then killed), or,
// when it replaces a dead watchdog, that replacement's start.
func Start(exe string, report func(error)) (stop func() error, err error) {
	if report == nil {
		report = func(error) {}
	}
	w := &watchdog{exe: exe, groups: groupSet{}, dirs: dirSet{}, pruneAt: minPruneAt, report: report}
	if !spawn.SetWatcher(w) {
		return nil, errors.New("child: a watchdog is already running")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.startLocked(); err != nil {
		w.stopped = true // a registration already holding w must not start one
		spawn.ClearWatcher(w)
		return nil, err
	}
	return w.stop, nil
}

// watchdog is the daemon's side: the registered groups and the process that
// is told about them.
type watchdog struct {
	exe     string // the binary each watchdog process runs
	mu      sync.Mutex
	proc    *watchdogProc // nil after stop, or after a death not yet repaired
	groups  groupSet      // every registered group: what a replacement is told
	dirs    dirSet        // every registered directory: likewise
	pruneAt int           // groups is pruned when it reaches this size
	stopped bool
	report  func(error)
	reapers sync.WaitGroup
}

// watchdogProc is one watchdog process.
type watchdogProc struct {
	proc   *os.Process // holds a pidfd: Kill never reaches a recycled pid
	pipe   *os.File    // write end of its stdin, pollable
	began  time.Time
	exited chan struct{} // closed once reaped; status is set by then
	status error         // nil when it exited 0
}

// Watch registers the process group pgid, whose leader has start time start
// (spawn.Watcher).
func (w *watchdog) Watch(pgid int, start uint64) {
	if !validPgid(pgid) {
		return
	}
	w.update(func() error {
		w.groups[pgid] = start
		w.pruneIfGrown()
		return w.sendLocked(record{watch: true, pgid: pgid, start: start})
	})
}

// Unwatch unregisters the process group pgid, if registered (spawn.Watcher).
func (w *watchdog) Unwatch(pgid int) {
	w.update(func() error {
		if _, ok := w.groups[pgid]; !ok {
			return nil
		}
		delete(w.groups, pgid)
		return w.sendLocked(record{pgid: pgid})
	})
}

// update runs change under the mutex unless the watchdog was stopped, and
// reports its error once the mutex is released.
func (w *watchdog) update(change func() error) {
	w.mu.Lock()
	var err error
	if !w.stopped {
		err = change()
	}
	w.mu.Unlock()
	if err != nil {
		w.report(err)
	}
}

// WatchDir registers the directory path (spawn.Watcher): the watchdog
// removes it if the daemon dies first. A path the watchdog would refuse
// (validDir) is not registered.
func (w *watchdog) WatchDir(path string) {
	if !validDir(path) {
		return
	}
	w.update(func() error {
		w.dirs[path] = struct{}{}
		return w.sendLocked(record{watch: true, dir: path})
	})
}

// UnwatchDir unregisters the directory path, if registered (spawn.Watcher).
func (w *watchdog) UnwatchDir(path string) {
	w.update(func() error {
		if _, ok := w.dirs[path]; !ok {
			return nil
		}
		delete(w.dirs, path)
		return w.sendLocked(record{dir: path})
	})
}

// pruneIfGrown drops the groups that are gone once the set has doubled since
// the last prune: groups forgotten with members left are unregistered by
// nobody, so the set would otherwise grow for the daemon's whole life.
func (w *watchdog) pruneIfGrown() {
	if len(w.groups) < w.pruneAt {
		return
	}
	w.groups.prune()
	w.pruneAt = max(minPruneAt, 2*len(w.groups))
}

// sendLocked tells the watchdog r, replacing a dead one (which is told the
// whole set, r included). A failed write needs nothing more: a dead
// watchdog's reaper replaces it, and a wedged one is killed here so that
// its reaper does. The error is a failed replacement.
func (w *watchdog) sendLocked(r record) error {
	if w.proc == nil {
		return w.startLocked()
	}
	if err := w.proc.write(r.appendTo(nil)); errors.Is(err, os.ErrDeadlineExceeded) {
		w.proc.proc.Kill()
	}
	return nil
}

// startLocked starts a watchdog process and tells it every registered group
// and directory.
func (w *watchdog) startLocked() error {
	p, err := startWatchdogProc(w.exe)
	if err != nil {
		return fmt.Errorf("starting the watchdog: %w", err)
	}
	w.proc = p
	w.reapers.Add(1)
	go w.reap(p)
	w.groups.prune()
	var all []byte
	for pgid, start := range w.groups {
		all = record{watch: true, pgid: pgid, start: start}.appendTo(all)
	}
	for dir := range w.dirs {
		all = record{watch: true, dir: dir}.appendTo(all)
	}
	if len(all) > 0 {
		if err := p.write(all); err != nil {
			p.proc.Kill() // its reaper replaces it
			return fmt.Errorf("telling the new watchdog the registered groups and directories: %w", err)
		}
	}
	return nil
}

// reap waits for p's exit and, when it was not stopped, repairs the death.
func (w *watchdog) reap(p *watchdogProc) {
	defer w.reapers.Done()
	st, err := p.proc.Wait()
	if err == nil && !st.Success() {
		err = errors.New(st.String())
	}
	p.status = err
	close(p.exited)
	if err := w.replace(p); err != nil {
		w.report(err)
	}
}

// replace handles the unexpected death of p: it starts a replacement unless
// p died young. It returns what to report, nil after a stop.
func (w *watchdog) replace(p *watchdogProc) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc != p { // stopped
		return nil
	}
	w.proc = nil
	p.pipe.Close()
	died := fmt.Errorf("the watchdog (pid %d) died: %v", p.proc.Pid, p.status)
	if time.Since(p.began) < watchdogRestartGap {
		return fmt.Errorf("%w; it lived less than %v, so it is replaced at the next registration", died, watchdogRestartGap)
	}
	if err := w.startLocked(); err != nil {
		return fmt.Errorf("%w; %w", died, err)
	}
	return fmt.Errorf("%w; replaced by pid %d", died, w.proc.proc.Pid)
}

// stop is Start's stop function.
func (w *watchdog) stop() error {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return nil
	}
	w.stopped = true
	p := w.proc
	w.proc = nil
	w.mu.Unlock()
	spawn.ClearWatcher(w)
	var err error
	if p != nil {
		err = p.finish()
	}
	w.reapers.Wait()
	return err
}

// finish closes p's input and waits for its exit (killing it after
// watchdogStopTimeout).
func (p *watchdogProc) finish() error {
	p.pipe.Close()
	select {
	case <-p.exited:
	case <-time.After(watchdogStopTimeout):
		p.proc.Kill()
		<-p.exited
		return fmt.Errorf("the watchdog (pid %d) did not exit within %v of its input's end: killed", p.proc.Pid, watchdogStopTimeout)
	}
	if p.status != nil {
		return fmt.Errorf("the watchdog (pid %d) exited: %w", p.proc.Pid, p.status)
	}
	return nil
}

func (p *watchdogProc) write(b []byte) error {
	p.pipe.SetWriteDeadline(time.Now().Add(watchdogWriteTimeout))
	_, err := p.pipe.Write(b)
	return err
}

// startWatchdogProc starts exe as a watchdog (see main_linux.go) and waits
// until it is ready. It is started through
// the spawner, so it inherits no descriptor but its fds 0-2; no parent-death
// signal: it must outlive the daemon.
//
// Its own process group keeps a terminal's and a supervisor's group signals
// away from it. It stays in the daemon's session on purpose: when the daemon
// dies, the watchdog's group becomes orphaned, and the kernel sends an
// orphaned group with a stopped member SIGHUP (ignored) and SIGCONT — so
// even a watchdog someone stopped wakes up, reads the end of its input and
// does its job. (A new session would be orphaned from the start, and a
// stopped watchdog would stay stopped for good.)
func startWatchdogProc(exe string) (*watchdogProc, error) {
	r, input, err := watchdogPipe()
	if err != nil {
		return nil, err
	}
	ready, readyW, err := spawn.Pipe("watchdog-ready")
	if err != nil {
		spawn.CloseFds(r)
		input.Close()
		return nil, err
	}
	defer ready.Close()
	pid, err := spawn.ForkExec(exe, []string{watchdogArgv0}, &syscall.ProcAttr{
		Env:   []string{},
		Files: []uintptr{uintptr(r), uintptr(readyW), uintptr(unix.Stderr)},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	spawn.CloseFds(r, readyW)
	if err != nil {
		input.Close()
		return nil, err
	}
	// Our unreaped child: the pidfd FindProcess opens is certainly its own.
	proc, _ := os.FindProcess(pid) // never fails on Unix
	p := &watchdogProc{proc: proc, pipe: input, began: time.Now(), exited: make(chan struct{})}
	if err := awaitReady(ready); err != nil {
		proc.Kill()
		proc.Wait()
		input.Close()
		return nil, err
	}
	return p, nil
}

// awaitReady reads the watchdog's readiness line within watchdogStartTimeout.
func awaitReady(ready *os.File) error {
	ready.SetReadDeadline(time.Now().Add(watchdogStartTimeout))
	b := make([]byte, len(watchdogReady))
	if _, err := io.ReadFull(ready, b); err != nil || string(b) != watchdogReady {
		return fmt.Errorf("the watchdog did not report ready (read %q: %v)", b, err)
	}
	return nil
}

// watchdogPipe returns the raw, blocking read end and the pollable write
// end of the watchdog's input, both close-on-exec.
func watchdogPipe() (int, *os.File, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, nil, os.NewSyscallError("pipe2", err)
	}
	w, err := spawn.Pollable(p[1], "watchdog-input")
	if err != nil {
		unix.Close(p[0])
		return -1, nil, err
	}
	return p[0], w, nil
}
