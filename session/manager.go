package session

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Manager queues runs FIFO, runs at most MaxConcurrent at once, keeps the
// warm pool, and tears everything down on Shutdown.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	shutting bool
	running  int           // runs holding a concurrency slot (dequeued, not settled)
	queue    fairQueue     // runs waiting for a slot, FIFO per lane (fair.go)
	runs     map[*Run]bool // accepted and not yet quiescent; value: holds a slot
	idle     *sync.Cond    // signalled when runs shrinks
	warm     *warmPool
	sandbox  *sandbox.Config // tier sandbox, else nil
	forker   *forker         // start mode fork (either tier), else nil
	egress   *childEgress    // how children reach the egress proxy; nil: no proxy
	mpl      *mplConfig      // matplotlib's directory (nil when it could not be made)
	start    startFunc

	// stopping ends at Shutdown: what waits on it (a session's package
	// installation) stops.
	stopping     context.Context
	stopStopping context.CancelFunc

	sessions  map[string]*Session   // open sessions (booting ones included: they count against the cap)
	ended     map[string]sessionEnd // ended sessions: −32004's state and reason
	sessionWG sync.WaitGroup        // session opens, forks and teardowns under way

	noGraceKill bool // test hook (C129): suppress the grace-period SIGKILL
}

// NewManager builds a Manager; with WarmPool > 0 it starts filling the pool.
func NewManager(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if abs, err := filepath.Abs(cfg.TempDir); err == nil {
		cfg.TempDir = abs
	}
	if cfg.MaxConcurrent < 1 {
		cfg.MaxConcurrent = 1
	}
	if cfg.Limits.MaxDiskMb <= 0 {
		cfg.Limits.MaxDiskMb = protocol.DefaultMaxDiskMb
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionCPUSeconds <= 0 {
		cfg.SessionCPUSeconds = DefaultSessionCPUSeconds
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, runs: make(map[*Run]bool),
		sessions: make(map[string]*Session), ended: make(map[string]sessionEnd)}
	if cfg.MatplotlibDir {
		m.mpl = newMplConfig(cfg.TempDir, cfg.Logger)
	}
	m.stopping, m.stopStopping = context.WithCancel(context.Background())
	if cfg.Egress != nil {
		m.egress = newChildEgress(cfg.Egress, cfg.Isolation == IsolationSandbox, cfg.TempDir, cfg.Logger)
	}
	if cfg.Isolation == IsolationSandbox {
		sb := sandboxFor(cfg.Python, cfg.TempDir, cfg.PythonTrees, packageTrees(cfg.Packages))
		if m.mpl != nil {
			sb.ReadOnly = append(sb.ReadOnly, m.mpl.path())
		}
		if dir := m.egress.trustDir(); dir != "" {
			sb.ReadOnly = append(sb.ReadOnly, dir)
		}
		sb.ProxyListener = m.egress != nil && m.egress.inside
		m.sandbox = &sb
	}
	if cfg.StartMode == StartFork {
		m.forker = newForker(cfg.Python, cfg.TempDir, m.sandbox, cfg.Logger, cfg.Preload, m.mpl)
	}
	m.start = m.startFunc()
	m.idle = sync.NewCond(&m.mu)
	m.warm = newWarmPool(m, cfg.WarmPool)
	m.mpl.start(cfg.Python, m.log, m.warm.renew) // the waiting children were started without it
	if m.forker != nil {
		m.forker.preloadFirst(cfg.Limits.AddressSpaceMb, func(st PreloadStatus) {
			if st.Err == nil {
				m.warm.renew()
			}
			if cfg.PreloadDone != nil {
				cfg.PreloadDone(st)
			}
		})
	}
	return m
}

// Submit queues a run. runID is the JSON text of the request id. onResult is
// called exactly once with the settled result (from a goroutine of the run,
// never from inside Submit or Cancel). A run with a SessionID queues on its
// session first; an id that is not open is refused with a *SessionError.
func (m *Manager) Submit(runID string, p protocol.RunParams, c Client, onResult func(protocol.Result)) (*Run, error) {
	return m.submit(nil, runID, p, c, onResult)
}

// submit is Submit on lane (nil: the Manager's own, fair.go).
func (m *Manager) submit(lane *Lane, runID string, p protocol.RunParams, c Client, onResult func(protocol.Result)) (*Run, error) {
	if p.SessionID != "" {
		return m.submitSession(lane, runID, p, c, onResult)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shutting {
		return nil, ErrShuttingDown
	}
	if m.running >= m.cfg.MaxConcurrent || m.queue.len() > 0 {
		if m.queue.len() >= m.cfg.MaxQueued {
			return nil, ErrQueueFull
		}
	}
	r := m.newRunIn(lane, m.cfg.Limits, runID, p, c, onResult)
	m.runs[r] = false
	m.slotLocked(r)
	return r, nil
}

// slot starts r now if a slot is free and nobody waits, else queues it.
func (m *Manager) slot(r *Run) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.slotLocked(r)
}

func (m *Manager) slotLocked(r *Run) {
	if m.running >= m.cfg.MaxConcurrent || m.queue.len() > 0 {
		m.queue.push(r)
		return
	}
	m.startLocked(r)
}

// QueueFull reports whether a Submit now would return ErrQueueFull (rpc
// checks it before validating params, docs/protocol.md §3.4).
func (m *Manager) QueueFull() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.shutting && (m.running >= m.cfg.MaxConcurrent || m.queue.len() > 0) &&
		m.queue.len() >= m.cfg.MaxQueued
}

// startLocked gives r a slot and starts it.
func (m *Manager) startLocked(r *Run) {
	m.running++
	m.runs[r] = true
	r.dispatch(event{kind: evDequeue}) // no effects
	go r.start()
}

// dispatchLocked starts queued runs while slots are free.
func (m *Manager) dispatchLocked() {
	for !m.shutting && m.running < m.cfg.MaxConcurrent && m.queue.len() > 0 {
		m.startLocked(m.queue.pop())
	}
}

// abort decides r abort with msg.
func (m *Manager) abort(r *Run, msg string) { m.fail(r, abortError(msg)) }

// fail decides r with err: a run queued for a slot leaves the queue and
// settles without a child; any other is decided (a live one's kill follows).
func (m *Manager) fail(r *Run, err *protocol.RunError) {
	m.mu.Lock()
	queued := m.queue.remove(r)
	m.mu.Unlock()
	if queued {
		r.failStart(err)
		return
	}
	r.decide(decision{err: err})
}

// released is called once at settlement: free the slot, start the next run.
func (m *Manager) released(r *Run) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runs[r] {
		m.runs[r] = false
		m.running--
	}
	m.dispatchLocked()
}

// forget is called once at quiescence.
func (m *Manager) forget(r *Run) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, r)
	m.idle.Broadcast()
}

// Shutdown refuses new runs and sessions, closes every session (its runs
// abort, its session/closed "shutdown" is sent), decides every other run
// abort "server is shutting down", kills the warm pool, and returns when
// every run is quiescent (its result delivered) and every run directory is
// removed.
func (m *Manager) Shutdown() {
	m.mu.Lock()
	m.shutting = true
	m.mu.Unlock()
	if m.forker != nil {
		m.forker.stopWaiting() // a session open waiting for the preload goes on (cold)
	}
	m.stopStopping()
	m.closeSessions(func(*Session) bool { return true }, protocol.MsgShuttingDown, "the daemon is shutting down")
	m.mu.Lock()
	queued := m.queue.drain()
	all := make([]*Run, 0, len(m.runs))
	for r := range m.runs {
		all = append(all, r)
	}
	m.mu.Unlock()

	for _, r := range queued {
		r.failStart(abortError(protocol.MsgShuttingDown))
	}
	for _, r := range all {
		r.decide(decision{err: abortError(protocol.MsgShuttingDown)})
	}
	m.warm.stop()

	m.mu.Lock()
	for len(m.runs) > 0 {
		m.idle.Wait()
	}
	m.mu.Unlock()
	for _, r := range all {
		<-r.out.delivered
	}
	for _, r := range queued {
		<-r.out.delivered
	}
	m.warm.wait()
	m.sessionWG.Wait()
	if m.forker != nil {
		m.forker.close()
	}
	m.mpl.close(m.log)
	m.egress.close(m.log)
}

// takeWarm returns a warm worker, or nil.
func (m *Manager) takeWarm() *worker {
	m.mu.Lock()
	alone := m.running == 1
	m.mu.Unlock()
	return m.warm.take(alone)
}

// spawnWorker stages and starts a worker the way the configuration says.
func (m *Manager) spawnWorker() (*worker, *protocol.RunError) {
	return spawnWorker(m.cfg.Python, m.mpl.env(), m.egress, func() (*rundir.Dir, error) { return rundir.Make(m.cfg.TempDir) }, m.start)
}

// startFunc picks how children start: sandboxed, forked or spawned.
func (m *Manager) startFunc() startFunc {
	if m.forker != nil {
		return m.forker.spawn
	}
	return m.coldStart()
}

// coldStart starts a fresh interpreter: sandboxed in tier sandbox.
func (m *Manager) coldStart() startFunc {
	if m.sandbox != nil {
		sb := *m.sandbox
		return func(spec child.Spec) (*child.Process, error) { return sandbox.Start(spec, sb) }
	}
	return child.Start
}

// spawnCold stages and starts a child on a fresh interpreter, never a fork.
func (m *Manager) spawnCold() (*worker, *protocol.RunError) {
	return spawnWorker(m.cfg.Python, m.mpl.env(), m.egress, func() (*rundir.Dir, error) { return rundir.Make(m.cfg.TempDir) }, m.coldStart())
}

// fitsPreload reports whether a child whose address-space budget is mb may
// be a fork of the preloaded server (or a warm child, which may be one):
// the server's own size must leave it preloadRoomMb. Else it starts cold,
// as it would without the preload (docs/containment-start-modes.md §4.4).
func (m *Manager) fitsPreload(mb int64) bool {
	return m.forker == nil || mb-m.forker.preloadedMb() >= preloadRoomMb
}
