package session

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// The disk budget (limits.maxDiskMb, docs/protocol.md §7): a run's directory,
// or a session's for the session's whole life, is measured every
// diskSampleEvery, and one found holding more than its budget ends the run
// output-limit (a session run's outcome then loses its session; between
// runs the session is lost). Besides what the directory lists, the files
// the run's processes keep open or mapped after unlinking them count
// (rundir.Dir.Hidden). A crossing is therefore seen within one
// period (longer for a directory of thousands of entries: diskWalkShare)
// and a walk; what the program writes meanwhile is bounded by the
// file system's own free space, which the kill gives back at once.

const (
	diskSampleEvery = 100 * time.Millisecond
	// maxDirEntries bounds a measured directory's files and directories:
	// the budget of inodes, and of the measuring walk's cost (about 28 ms
	// for 10 000 entries on ext4 on the loaded reference machine).
	maxDirEntries = 10000
	// diskWalkShare spaces the walks of a large directory out: the next
	// one comes no sooner than this many times the last one's duration
	// after it, so that measuring costs the daemon at most a fifth of a CPU
	// per watched directory.
	diskWalkShare = 4
)

// maxHeldEntries bounds the threads, open descriptors and mappings of a run's
// processes that a measurement looks at for files no directory lists
// (rundir.Dir.Hidden): hundreds for a Python process with pandas loaded.
const maxHeldEntries = 100000

// birthSlack is how much older than its directory (or its watch) a file
// may be and still count: file times come from a coarse clock (a tick
// behind), and a library replaced on disk in the second before is no loss.
const birthSlack = time.Second

// diskWatch measures one directory until stopped. Like cpuSampler it is a
// timer, not a goroutine.
type diskWatch struct {
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
	since   time.Time // files made before are not counted; fixed at start
}

// watchDisk measures dir, and the files no directory lists that the
// processes family() returns hold on its file system, every
// diskSampleEvery, and hands each measurement to judge, which compares it
// with the budget in force when it judges (a session's changes as runs
// attach and detach while a walk is under way); it goes on until stop.
// Unlisted files made well before dir (or, where the file system keeps no
// birth times, before the watch started) are not the program's and do not
// count; those made since do, the files the daemon staged into dir for a
// warm child that waited in the pool included: a program may unlink and
// grow them.
//
// origin, when not zero, is an earlier start to count from: a fork's
// (session/fork) is its source's, since the fork inherits the source's
// mappings of files made before its own directory.
func watchDisk(dir *rundir.Dir, family func() []int, judge func(diskUse), origin time.Time) *diskWatch {
	since := time.Now()
	if born, ok := dir.Born(); ok && born.Before(since) {
		since = born
	}
	since = since.Add(-birthSlack)
	if !origin.IsZero() && origin.Before(since) {
		since = origin
	}
	d := &diskWatch{since: since}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.t = time.AfterFunc(diskSampleEvery, func() {
		began := time.Now()
		judge(measureDisk(dir, family, since))
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.stopped {
			d.t.Reset(max(diskSampleEvery, diskWalkShare*time.Since(began)))
		}
	})
	return d
}

// stop ends the checks (a check under way may still finish). A nil watch
// is stopped already.
func (d *diskWatch) stop() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	d.t.Stop()
}

// diskUse is one measurement of a watched directory: its bytes, or why
// the daemon could not measure it.
type diskUse struct {
	bytes int64
	err   error
}

// measureDisk measures dir with what family's processes hold unlisted on
// its file system, made since then.
func measureDisk(dir *rundir.Dir, family func() []int, since time.Time) diskUse {
	u, err := dir.Measure(maxDirEntries)
	if err != nil {
		return diskUse{err: err}
	}
	h, err := dir.Hidden(family(), since, maxHeldEntries)
	return diskUse{bytes: u.Bytes + h, err: err}
}

// over is the run error for a directory measured as u under a budget of mb
// MiB, or nil.
func (u diskUse) over(mb int64) *protocol.RunError {
	switch {
	case errors.Is(u.err, rundir.ErrTooLarge):
		return diskError(mb, "more than "+strconv.Itoa(maxDirEntries)+" files and directories, more than "+
			strconv.Itoa(maxHeldEntries)+" threads, open descriptors and mappings, or deeper than the daemon measures")
	case u.err != nil:
		return diskError(mb, "entries the daemon cannot measure")
	case u.bytes > mb*protocol.MiB:
		return diskError(mb, "more than "+strconv.FormatInt(mb, 10)+" MiB")
	}
	return nil
}

// diskError is the output-limit of a directory that holds what.
func diskError(mb int64, what string) *protocol.RunError {
	return &protocol.RunError{Kind: protocol.KindOutputLimit,
		Message: "disk budget reached (maxDiskMb=" + strconv.FormatInt(mb, 10) + "): the working directory held " + what}
}
