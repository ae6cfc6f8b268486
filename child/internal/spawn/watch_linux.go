//go:build linux

package spawn

import "sync"

// Watcher is told of the process groups the daemon creates (child.Start,
// a fork server's Spawn) and of those found empty (Process.GroupEmpty), so
// that it can kill what is left of them when the daemon dies: the watchdog.
// It is likewise told of the directories the daemon creates and removes
// (rundir.Create, rundir.Remove), to remove those left when the daemon dies.
// Its methods must not block for long; they run on the calling goroutine.
type Watcher interface {
	Watch(pgid int, start uint64)
	Unwatch(pgid int)
	WatchDir(path string)
	UnwatchDir(path string)
}

var (
	watcherMu sync.Mutex
	watcher   Watcher // nil: registration is a no-op
)

// SetWatcher installs w and reports true, or reports false when a watcher is
// installed already.
func SetWatcher(w Watcher) bool {
	watcherMu.Lock()
	defer watcherMu.Unlock()
	if watcher != nil {
		return false
	}
	watcher = w
	return true
}

// ClearWatcher removes w if it is the installed watcher.
func ClearWatcher(w Watcher) {
	watcherMu.Lock()
	defer watcherMu.Unlock()
	if watcher == w {
		watcher = nil
	}
}

// Watching returns the installed watcher, nil if none.
func Watching() Watcher {
	watcherMu.Lock()
	defer watcherMu.Unlock()
	return watcher
}

// WatchGroup registers p's group, whose leader's start time p recorded, with
// the installed watcher (if any). Without a start time there is no guard
// against a recycled id, and the group is not registered.
func WatchGroup(p *Process) {
	if w := Watching(); w != nil && p.hasStart {
		w.Watch(p.Pid, p.startTime)
	}
}

func unwatch(pgid int) {
	if w := Watching(); w != nil {
		w.Unwatch(pgid)
	}
}

// WatchDir registers the directory path (absolute) with the installed
// watcher, if any.
func WatchDir(path string) {
	if w := Watching(); w != nil {
		w.WatchDir(path)
	}
}

// UnwatchDir unregisters the directory path with the installed watcher, if any.
func UnwatchDir(path string) {
	if w := Watching(); w != nil {
		w.UnwatchDir(path)
	}
}
