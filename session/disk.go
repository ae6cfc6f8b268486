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
// runs the session is lost). A crossing is therefore seen within one
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

// diskWatch measures one directory until stopped. Like cpuSampler it is a
// timer, not a goroutine.
type diskWatch struct {
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
}

// watchDisk measures dir every diskSampleEvery against budgetMb() MiB and
// calls over, with the run's error, each time it finds the budget crossed
// (over must be idempotent); it goes on until stop.
func watchDisk(dir *rundir.Dir, budgetMb func() int64, over func(*protocol.RunError)) *diskWatch {
	d := &diskWatch{}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.t = time.AfterFunc(diskSampleEvery, func() {
		began := time.Now()
		if err := checkDisk(dir, budgetMb()); err != nil {
			over(err)
		}
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

// checkDisk is the run error for dir over a budget of mb MiB, or nil.
func checkDisk(dir *rundir.Dir, mb int64) *protocol.RunError {
	u, err := dir.Measure(maxDirEntries)
	switch {
	case errors.Is(err, rundir.ErrTooLarge):
		return diskError(mb, "more than "+strconv.Itoa(maxDirEntries)+" files and directories, or deeper than the daemon measures")
	case err != nil:
		return diskError(mb, "entries the daemon cannot measure")
	case u.Bytes > mb*protocol.MiB:
		return diskError(mb, "more than "+strconv.FormatInt(mb, 10)+" MiB")
	}
	return nil
}

// diskError is the output-limit of a directory that holds what.
func diskError(mb int64, what string) *protocol.RunError {
	return &protocol.RunError{Kind: protocol.KindOutputLimit,
		Message: "disk budget reached (maxDiskMb=" + strconv.FormatInt(mb, 10) + "): the working directory held " + what}
}
