package session

import (
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/forkserver"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
	"github.com/coderun-rpc/coderun-rpc/py"
)

// Start modes (Config.StartMode): a fresh interpreter per run, or a fork of
// the fork server's pristine interpreter (docs/containment-start-modes.md §4, and §4.1
// for tier sandbox).
const (
	StartSpawn = "spawn"
	StartFork  = "fork"
)

// forker owns the daemon's fork server (py/forkserver.py, forkserver.Server).
// The server is started on first use and again, after a back-off, once it has
// died; a spawn the server cannot serve falls back to a cold start, logged,
// so a broken server costs speed, never a run.
type forker struct {
	python, tempDir string
	sb              *sandbox.Config // tier sandbox: the server runs with --sandbox, children are contained
	log             *slog.Logger

	mu      sync.Mutex
	srv     *forkserver.Server
	dir     *rundir.Dir // the server's staged directory, held open
	retryAt time.Time   // no new server before this, after a failure
	backoff time.Duration
	closed  bool
}

func newForker(python, tempDir string, sb *sandbox.Config, log *slog.Logger) *forker {
	return &forker{python: python, tempDir: tempDir, sb: sb, log: log, backoff: warmBackoffMin}
}

// spawn forks a child for the staged run directory spec.Dir (the bootstrap
// path, spec's last argument, becomes its argv), or starts it cold when the
// server cannot serve it.
func (f *forker) spawn(spec child.Spec) (*child.Process, error) {
	if srv := f.server(); srv != nil {
		p, err := f.fork(srv, spec)
		if err == nil {
			return p, nil
		}
		f.log.Warn("fork server: spawn failed; starting the child cold", "err", err)
	}
	if f.sb != nil {
		return sandbox.Start(spec, *f.sb)
	}
	return child.Start(spec)
}

// fork asks srv for the child, contained in tier sandbox.
func (f *forker) fork(srv *forkserver.Server, spec child.Spec) (*child.Process, error) {
	if f.sb != nil {
		return sandbox.SpawnForked(srv, spec, *f.sb)
	}
	return srv.Spawn(forkserver.Spec{Argv: spec.Args[len(spec.Args)-1:], Env: spec.Env, Dir: spec.Dir})
}

// server returns a live fork server, starting one if allowed, or nil.
func (f *forker) server() *forkserver.Server {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv != nil {
		select {
		case <-f.srv.Done():
			f.log.Warn("fork server: ended", "err", f.srv.Err())
			f.stopLocked()
			f.backOffLocked()
		default:
			return f.srv
		}
	}
	if f.closed || time.Now().Before(f.retryAt) {
		return nil
	}
	if err := f.startLocked(); err != nil {
		f.log.Error("fork server: failed to start; children start cold", "err", err,
			"retryIn", f.backoff)
		f.backOffLocked()
		return nil
	}
	return f.srv
}

// backOffLocked defers the next start by the current back-off and doubles it
// (up to the warm pool's maximum); meanwhile children start cold.
func (f *forker) backOffLocked() {
	f.retryAt = time.Now().Add(f.backoff)
	f.backoff = min(f.backoff*2, warmBackoffMax)
}

func (f *forker) startLocked() error {
	files, args := []stagedFile{{"forkserver.py", py.ForkServer}}, []string{"-u", "-I", ""}
	if f.sb != nil {
		files, args = append(files, stagedFile{"sandboxfork.py", py.SandboxFork}), append(args, "--sandbox")
	}
	wd, err := stageDir(func() (*rundir.Dir, error) { return rundir.Make(f.tempDir) }, files...)
	if err != nil {
		return err
	}
	dir := wd.Path()
	args[2] = filepath.Join(dir, "forkserver.py")
	srv, err := forkserver.Start(child.Spec{
		Path: f.python,
		Args: args,
		Env:  []string{"TMPDIR=" + dir},
		Dir:  dir,
	})
	if err != nil {
		dropDir(wd, f.log)
		return err
	}
	f.srv, f.dir = srv, wd
	return nil
}

// stopLocked closes the server (its children die of their parent-death
// signal; runs using them settle as worker-exit) and removes its directory.
func (f *forker) stopLocked() {
	if f.srv == nil {
		return
	}
	f.srv.Close()
	dropDir(f.dir, f.log)
	f.srv, f.dir = nil, nil
}

// close stops the server for good (Manager.Shutdown, after every run).
func (f *forker) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.stopLocked()
}
