package session

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/py"
)

// worker is one staged and spawned child (cold, or taken from the warm pool).
type worker struct {
	dir  string      // the working directory's path: for the child, never opened again by the daemon
	wd   *rundir.Dir // the working directory, held open since it was made: every daemon-side operation on it
	proc *child.Process
	// The daemon's ends, registered with the runtime poller by child.Start:
	// deadlines work and Close releases a blocked Read or Write.
	conn   *os.File // fd 3
	stdout *os.File
	stderr *os.File

	warm    bool   // started ahead of time by the warm pool
	release func() // set when the pool lent the child's place: gives it back (at settlement)
	home    *home  // a sandboxed session's: its family's home, released with the directory (sandbox.go)
	// egressToken is the child's egress proxy credentials ("": none, its
	// requests are refused): each run on it opens a grant with it.
	egressToken string
	// secrets are the run's (a session's: its first run's) egress secrets
	// with this child's placeholders, which its boot frame puts in its
	// environment; nil: none.
	secrets *egress.Bound
	// egressLn is the proxy's listener inside the child's network namespace
	// (tier sandbox), released with the child's descriptors.
	egressLn *nsListener

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

// stageDir creates a run directory (0700, with mk: rundir.Make, registered
// with the watchdog, held open) holding bootstrap.py, protocol.py and extra
// (0600); any failure removes the partial directory (docs/child-protocol.md
// §4.3 step 1).
func stageDir(mk dirMaker, extra ...stagedFile) (wd *rundir.Dir, err error) {
	wd, err = mk()
	if err != nil {
		return nil, err
	}
	files := append([]stagedFile{{"bootstrap.py", py.Bootstrap}, {"protocol.py", py.Protocol}}, extra...)
	err = wd.Do(func(fd int) error {
		for _, f := range files {
			if err := writeAt(fd, f.name, f.data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		dropDir(wd, nil)
		return nil, err
	}
	return wd, nil
}

// dirMaker makes a held directory: rundir.Make in the daemon's TMPDIR, or
// (*rundir.Dir).Make in a session's home.
type dirMaker func() (*rundir.Dir, error)

// writeAt creates the file name (0600) in the directory dirfd and writes
// data, refusing whatever already is there.
func writeAt(dirfd int, name string, data []byte) error {
	fd, err := syscall.Openat(dirfd, name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "openat", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// dropDir removes wd (logging a failure when log is set) and closes it.
func dropDir(wd *rundir.Dir, log *slog.Logger) {
	if wd == nil {
		return
	}
	if err := wd.Remove(); err != nil && log != nil {
		log.Error("failed to remove a run directory", "dir", wd.Path(), "err", err)
	}
	wd.Close()
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

// spawnWorker stages and starts one child (docs/child-protocol-daemon.md §4.3 steps 1–3). Failures are the
// run's worker-exit; nothing is left behind.
// env is added to the child's environment (TMPDIR, its directory), and eg's
// proxy settings when eg is set.
func spawnWorker(python string, env []string, eg *childEgress, mk dirMaker, start startFunc) (*worker, *protocol.RunError) {
	wd, err := stageDir(mk)
	if err != nil {
		return nil, workerExit(msgStaging + pathless(err))
	}
	dir := wd.Path()
	spec := child.Spec{
		Path: python,
		Args: []string{"-u", "-I", filepath.Join(dir, "bootstrap.py")},
		Env:  append([]string{"TMPDIR=" + dir}, env...),
		Dir:  dir,
	}
	var token string
	if eg != nil {
		token = egress.NewToken()
		spec.Env = append(spec.Env, eg.env(token)...)
	}
	if err := resetOut(wd); err != nil {
		dropDir(wd, nil)
		return nil, workerExit(msgStaging + pathless(err))
	}
	proc, err := start(spec)
	if err != nil {
		dropDir(wd, nil)
		return nil, workerExit("python spawn error: " + pathless(err))
	}
	w := newWorker(wd, proc)
	w.conn, w.stdout, w.stderr = proc.Conn, proc.Stdout, proc.Stderr
	w.egressToken = token
	eg.reach(w)
	go w.reap()
	return w, nil
}

// newWorker is the worker of proc, started in wd; the caller sets its
// descriptors and starts reap.
func newWorker(wd *rundir.Dir, proc *child.Process) *worker {
	return &worker{dir: wd.Path(), wd: wd, proc: proc, exited: make(chan struct{}), writerDone: make(chan struct{}),
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
		w.egressLn.release()
	})
}

// removeDir removes the run directory through its descriptor, once; it
// first waits for an early removal pass that is under way, then removes
// whatever is left. The directory stays held (a removal that failed is
// tried again by closeDir).
func (w *worker) removeDir(log *slog.Logger) {
	w.removeOnce.Do(func() {
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		w.earlyOnce.Do(func() { close(w.earlyDone) })
		<-w.earlyDone
		if err := w.wd.Remove(); err != nil {
			log.Error("failed to remove a run directory", "dir", w.dir, "err", err)
		}
		w.home.release(log)
	})
}

// closeDir is removeDir, then a last removal pass (a survivor of the run's
// group may have written since), then closes the directory: the worker's
// end.
func (w *worker) closeDir(log *slog.Logger) {
	w.removeDir(log)
	dropDir(w.wd, log)
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
			before()      // out/ is read before it goes
			w.wd.Remove() // a failure is removeDir's to retry and log
		}()
	})
}
