package session

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
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
	preload         []string // CODERUN_PRELOAD (Config.Preload)
	env             []string // the server's environment beyond TMPDIR and serverThreadCaps (MPLCONFIGDIR)
	// settled is closed once the first preloaded server is ready or has
	// failed (nil without a preload): a session waits for it (awaitPreload).
	settled  chan struct{}
	stopWait chan struct{} // closed at shutdown: awaitPreload returns
	stopOnce sync.Once

	mu      sync.Mutex
	srv     *forkserver.Server
	dir     *rundir.Dir // the server's staged directory, held open
	retryAt time.Time   // no new server before this, after a failure
	backoff time.Duration
	closed  bool
}

func newForker(python, tempDir string, sb *sandbox.Config, log *slog.Logger, preload []string, mpl *mplConfig) *forker {
	f := &forker{python: python, tempDir: tempDir, sb: sb, log: log, preload: preload, backoff: warmBackoffMin}
	if len(preload) > 0 {
		f.settled, f.stopWait = make(chan struct{}), make(chan struct{})
	}
	if mpl != nil {
		f.env = []string{"MPLCONFIGDIR=" + mpl.path()}
	}
	return f
}

// spawn forks a child for the staged run directory spec.Dir (the bootstrap
// path, spec's last argument, becomes its argv), or starts it cold when the
// server cannot serve it.
func (f *forker) spawn(spec child.Spec) (*child.Process, error) {
	return f.spawnContained(spec, f.sb)
}

// spawnContained is spawn with sb as the child's containment in tier
// sandbox (a session's: sandbox.Config.Session and its home); sb is nil in
// tier process.
func (f *forker) spawnContained(spec child.Spec, sb *sandbox.Config) (*child.Process, error) {
	if srv := f.server(); srv != nil && f.serving(srv) {
		p, err := f.fork(srv, spec, sb)
		if err == nil {
			return p, nil
		}
		f.log.Warn("fork server: spawn failed; starting the child cold", "err", err)
	}
	if sb != nil {
		return sandbox.Start(spec, *sb)
	}
	return child.Start(spec)
}

// serving reports whether srv takes spawns now. A server with a preload is
// asked only once ready: a run never waits for the preload, it starts cold
// meanwhile (docs/containment-start-modes.md §4.4). Without one, the first spawn waits
// for the server's start-up, which is shorter than a cold start.
func (f *forker) serving(srv *forkserver.Server) bool {
	if len(f.preload) == 0 {
		return true
	}
	select {
	case <-srv.Ready():
		return true
	default:
		return false
	}
}

// awaitPreload returns once the first preloaded server is ready or has
// failed (at once without a preload). A session waits for it: it lives long,
// its program imports the modules again if it starts cold, and only a fork
// of the server can fork in turn (session/fork).
func (f *forker) awaitPreload() {
	if f.settled != nil {
		select {
		case <-f.settled:
		case <-f.stopWait:
		}
	}
}

// stopWaiting releases every awaitPreload for good (Manager.Shutdown).
func (f *forker) stopWaiting() {
	if f.stopWait != nil {
		f.stopOnce.Do(func() { close(f.stopWait) })
	}
}

// preloadedMb is the address space of the preloaded server that serves now
// (MiB), 0 when none does.
func (f *forker) preloadedMb() int64 {
	if len(f.preload) == 0 {
		return 0
	}
	f.mu.Lock()
	srv := f.srv
	f.mu.Unlock()
	if srv == nil || !f.serving(srv) {
		return 0
	}
	return srv.Preload().VmSizeKb / 1024
}

// preloadRoomMb is the address space a program must have left, at least,
// beside a preloaded server's (a forked child starts that size).
const preloadRoomMb = 64

// preloadFirst, with a preload, starts the first server now (unless a spawn
// already has) and, once it is
// ready or has failed, calls done (when set) with its outcome. A server
// whose preload failed, or whose size leaves no room for a program within
// addressSpaceMb, is stopped and no other is started: children start cold.
func (f *forker) preloadFirst(addressSpaceMb int64, done func(PreloadStatus)) {
	if len(f.preload) == 0 {
		return
	}
	f.mu.Lock()
	var err error
	if f.srv == nil {
		err = f.startLocked()
	}
	srv := f.srv
	f.mu.Unlock()
	if err != nil {
		f.refuseServers()
		close(f.settled)
		if done != nil {
			go done(PreloadStatus{Err: fmt.Errorf("fork server: failed to start: %w", err)})
		}
		return
	}
	go func() {
		st := awaitPreload(srv, addressSpaceMb)
		// A server the daemon closed while it loaded (shutdown) did not fail its
		// preload. Judged before refuseServers, which closes the server too.
		stopped := st.Err != nil && errors.Is(srv.Err(), forkserver.ErrClosed)
		if st.Err != nil {
			f.refuseServers()
		}
		if done != nil && !stopped {
			done(st) // the warm pool renewed before a waiting session takes a child
		}
		close(f.settled)
	}()
}

// awaitPreload waits until srv is ready or has ended and judges its preload.
func awaitPreload(srv *forkserver.Server, addressSpaceMb int64) PreloadStatus {
	select {
	case <-srv.Ready():
	case <-srv.Done():
	}
	p := srv.Preload()
	st := PreloadStatus{Skipped: p.Skipped, VmSizeKb: p.VmSizeKb, VmRSSKb: p.VmRSSKb}
	select {
	case <-srv.Ready():
	default:
		if p.Failed != nil {
			st.Err = p.Failed
		} else {
			st.Err = fmt.Errorf("the fork server ended while preloading: %w", srv.Err())
		}
		return st
	}
	if room := addressSpaceMb - p.VmSizeKb/1024; room < preloadRoomMb {
		st.Err = fmt.Errorf("the preloaded fork server's address space is %d MiB, which leaves %d MiB of the %d MiB "+
			"a run may have (at least %d MiB needed for a program)", p.VmSizeKb/1024, max(room, 0), addressSpaceMb, preloadRoomMb)
	}
	return st
}

// refuseServers stops the server and starts no other: a failed preload
// fails again, so children start cold from then on.
func (f *forker) refuseServers() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.stopLocked()
}

// fork asks srv for the child, contained by sb in tier sandbox.
func (f *forker) fork(srv *forkserver.Server, spec child.Spec, sb *sandbox.Config) (*child.Process, error) {
	if sb != nil {
		return sandbox.SpawnForked(srv, spec, *sb)
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
			failed := f.srv.Preload().Failed
			f.stopLocked()
			f.backOffLocked()
			if failed != nil { // it would fail again: no import of the preload every back-off
				f.log.Error("fork server: the preload failed; children start cold from now on", "err", failed)
				f.closed = true
			}
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
	if len(f.preload) > 0 {
		args = append(args, "--preload", strings.Join(f.preload, ","))
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
		Env:  slices.Concat([]string{"TMPDIR=" + dir}, serverThreadCaps, f.env),
		Dir:  dir,
	})
	if err != nil {
		dropDir(wd, f.log)
		return err
	}
	f.srv, f.dir = srv, wd
	return nil
}

// serverThreadCaps cap the thread pools of the BLAS and OpenMP libraries a
// preload may load (numpy's OpenBLAS starts one thread per CPU at import
// without them): the server must be single-threaded when it forks, and
// refuses to start otherwise. A forked run inherits pools of one thread;
// its environment is its own and does not carry these.
var serverThreadCaps = []string{"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1",
	"BLIS_NUM_THREADS=1", "VECLIB_MAXIMUM_THREADS=1", "NUMEXPR_NUM_THREADS=1"}

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
