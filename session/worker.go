package session

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/py"
)

// worker is one staged and spawned child (cold, or taken from the warm pool).
type worker struct {
	dir  string
	proc *child.Process
	// The daemon's ends, registered with the runtime poller by child.Start:
	// deadlines work and Close releases a blocked Read or Write.
	conn   *os.File // fd 3
	stdout *os.File
	stderr *os.File

	warm    bool   // started ahead of time by the warm pool
	release func() // set when the pool lent the child's place: gives it back (at settlement)
	home    *home  // a sandboxed session's: its family's home, released with the directory (sandbox.go)

	exited     chan struct{} // closed once reaped
	writerDone chan struct{} // closed once the run's fd-3 writer for this child has returned
	exit       child.Exit
	waitErr    error

	closeOnce  sync.Once
	removeOnce sync.Once
	earlyOnce  sync.Once     // the early removal pass (removeEarly), started at most once
	earlyDone  chan struct{} // closed when that pass is over, or when it will never run
}

// stagedFile is one file of a staged directory.
type stagedFile struct {
	name string
	data []byte
}

// stageDir creates a run directory (0700, rundir.Create: registered with the
// watchdog) holding bootstrap.py, protocol.py and extra (0600); any failure
// removes the partial directory (docs/child-protocol.md §4.3 step 1).
func stageDir(parent string, extra ...stagedFile) (dir string, err error) {
	dir, err = rundir.Create(parent)
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			rundir.Remove(dir)
			dir = ""
		}
	}()
	files := append([]stagedFile{{"bootstrap.py", py.Bootstrap}, {"protocol.py", py.Protocol}}, extra...)
	for _, f := range files {
		if err = writeFile(filepath.Join(dir, f.name), f.data); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// startFunc starts a staged child: child.Start, a sandboxed start, or a fork
// of the fork server.
type startFunc func(child.Spec) (*child.Process, error)

// msgStaging starts the error of a child that could not be staged.
const msgStaging = "failed to stage the python bootstrap in the daemon's temporary directory: "

// pathless is err's text without the path of an *os.PathError in it: the
// daemon's temporary directory and its directories' names are the host's,
// not the client's, to know.
func pathless(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// spawnWorker stages and starts one child (docs/child-protocol.md §4.3 steps 1–3). Failures are the
// run's worker-exit; nothing is left behind.
func spawnWorker(python, tempDir string, start startFunc) (*worker, *protocol.RunError) {
	dir, err := stageDir(tempDir)
	if err != nil {
		return nil, workerExit(msgStaging + pathless(err))
	}
	spec := child.Spec{
		Path: python,
		Args: []string{"-u", "-I", filepath.Join(dir, "bootstrap.py")},
		Env:  []string{"TMPDIR=" + dir},
		Dir:  dir,
	}
	if err := resetOut(dir); err != nil {
		rundir.Remove(dir)
		return nil, workerExit(msgStaging + pathless(err))
	}
	proc, err := start(spec)
	if err != nil {
		rundir.Remove(dir)
		return nil, workerExit("python spawn error: " + pathless(err))
	}
	w := newWorker(dir, proc)
	w.conn, w.stdout, w.stderr = proc.Conn, proc.Stdout, proc.Stderr
	go w.reap()
	return w, nil
}

// newWorker is the worker of proc, started in dir; the caller sets its
// descriptors and starts reap.
func newWorker(dir string, proc *child.Process) *worker {
	return &worker{dir: dir, proc: proc, exited: make(chan struct{}), writerDone: make(chan struct{}),
		earlyDone: make(chan struct{})}
}

// reap waits for the child once (wait4 with rusage).
func (w *worker) reap() {
	w.exit, w.waitErr = w.proc.Wait()
	close(w.exited)
}

// giveBackPlace returns the child's lent place to the warm pool (a no-op when
// the place was not lent).
func (w *worker) giveBackPlace() {
	if w.release != nil {
		w.release()
	}
}

// releaseWriter unblocks a writer stuck on a full socket.
func (w *worker) releaseWriter() {
	if w.conn != nil {
		w.conn.SetWriteDeadline(time.Now())
	}
}

// closeFiles closes the three descriptors (unblocking their readers).
func (w *worker) closeFiles() {
	w.closeOnce.Do(func() {
		for _, f := range []*os.File{w.conn, w.stdout, w.stderr} {
			if f != nil {
				f.Close()
			}
		}
	})
}

// removeDir removes the run directory, once; it first waits for an early
// removal pass that is under way, then removes whatever is left.
func (w *worker) removeDir(log *slog.Logger) {
	w.removeOnce.Do(func() {
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		w.earlyOnce.Do(func() { close(w.earlyDone) })
		<-w.earlyDone
		removeDir(w.dir, log)
		w.home.release(log)
	})
}

// removeEarly calls before, then starts a removal pass of the run directory in the background,
// at most once and never after removeDir has begun. It is called when every
// descriptor of the child has reached end of stream: removing a directory can
// take milliseconds (ext4 with online discard issues a synchronous discard for
// the directory's block: 0.3–5 ms measured), and the pass then overlaps the
// wait for the exit report. A program that closed its descriptors and still
// runs can make the pass fail by creating files meanwhile; removeDir, at
// settlement, removes what is left.
func (w *worker) removeEarly(before func()) {
	w.earlyOnce.Do(func() {
		go func() {
			defer close(w.earlyDone)
			before()             // out/ is read before it goes
			rundir.Remove(w.dir) // a failure is removeDir's to retry and log
		}()
	})
}
