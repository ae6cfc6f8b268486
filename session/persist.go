package session

import (
	"cmp"
	"crypto/rand"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// Session is one persistent session (docs/protocol-sessions.md §11): a long-lived
// child booted in session mode whose runs execute one at a time, FIFO, in
// one interpreter. Its readers (readLoop, strayLoop) and reaper watch serve
// the child's whole life and deliver to the current run, or to the session
// between runs, where data on fd 3, the end of fd 3 or the child's exit
// lose the session at once.
//
// Lock order: the Manager's mu, then a run's mu, then the session's mu; the
// session never calls into the Manager or a run while holding its own.
// freezeMu is taken before the session's mu and never under another lock.
type Session struct {
	m        *Manager
	owner    *Lane // whose it is: only its owner can name it (nil: the Manager's own, stdio)
	id       string
	lim      protocol.Limits // its runs' defaults; AddressSpaceMb is fixed for its life
	idle     time.Duration
	onClosed func(id, reason, message string) // the session/closed notification
	log      *slog.Logger

	mu         sync.Mutex
	cond       *sync.Cond    // signalled when the session becomes idle or ends
	w          *worker       // nil until booted
	pid        int           // the interpreter's pid, whose process tree /proc measures (procstat.go)
	held       *held         // the child's directory and /proc files, open from adopt to teardown
	cpuMark    time.Duration // its CPU time at the end of the last kept run (or at boot): the next run's base
	queue      []queued      // accepted runs and forks behind cur, FIFO
	cur        *Run          // the run holding the session: waiting for a slot, or attached
	attached   *Run          // cur once its run frame is queued to the child
	forking    bool          // a fork of the child is under way
	runs       int64         // runs settled after running in the child
	eof        [3]bool       // descriptors of the child at end of stream
	dead       bool          // the child was reaped
	loss       string        // a run's outcome ended the session: why (set by account)
	ended      bool
	endState   string // "closed" or "lost"
	endReason  string
	endErr     *protocol.RunError // what the runs the ending found settle with
	idleTimer  *time.Timer
	writerDone chan struct{} // closed when the last run's fd-3 writer has returned
	sampler    *cpuSampler   // the attached run's CPU check, stopped when it settles
	disk       *diskWatch    // its directory measured (disk.go), from adopt to its end
	diskOrigin time.Time     // a fork's: its source's disk watch start (watchDisk's origin); set before start
	// lease holds its packages' set (nil: none), from open to teardown;
	// set before the session is started, never changed.
	lease *wheelset.Lease

	freezeMu    sync.Mutex    // serialises syncFreeze
	frozen      *child.Frozen // the child's tree while stopped between runs (syncFreeze); under freezeMu
	freezeTimer *time.Timer   // freezeLater's; stopped when a run attaches
}

// queued is one entry of a session's FIFO: a run, or a fork's turn.
type queued struct {
	run  *Run
	fork *forkTurn
}

// forkTurn is a fork waiting in its source's queue; next sets due (and the
// session's forking) when every entry before it is done.
type forkTurn struct{ due bool }

// SessionError is a session/* or session run refusal: the cap (−32003) or an
// id that is unknown, closed or lost (−32004 with State and Reason as data).
type SessionError struct {
	Cap     bool
	State   string // "unknown", "closed" or "lost"
	Reason  string // "closed", "idle", "shutdown" or the loss; "" for unknown
	Message string
}

func (e *SessionError) Error() string { return e.Message }

// Session states and end reasons of SessionError and session/closed.
const (
	StateUnknown   = "unknown"
	StateClosed    = "closed"
	StateLost      = "lost"
	ReasonClosed   = "closed"
	ReasonIdle     = "idle"
	ReasonShutdown = "shutdown"
	ReasonLost     = "lost"
)

// sessionEnd is what the registry remembers of an ended session.
type sessionEnd struct {
	state, reason string
	owner         *Lane
}

const (
	sessionBootTimeout = 10 * time.Second       // boot-ack of a session child
	cpuSampleEvery     = 100 * time.Millisecond // the daemon's own CPU check of a session run
	msgSessionClosed   = "session closed"
	msgClosedFD3       = "the session's python process closed fd 3"
	exitWait           = 200 * time.Millisecond // for the reap after fd 3 ended between runs
)

// OpenSession boots a child in session mode (a warm one when ready) and
// registers it; onClosed is called once if the session ends by idle time, by
// loss or at shutdown (never after CloseSession). The session is the
// Manager's own (stdio's); Lane.OpenSession opens one a lane owns.
func (m *Manager) OpenSession(p protocol.SessionParams, onClosed func(id, reason, message string)) (string, error) {
	return m.openSession(nil, p, onClosed)
}

// openSession is OpenSession for owner.
func (m *Manager) openSession(owner *Lane, p protocol.SessionParams, onClosed func(id, reason, message string)) (string, error) {
	s, err := m.register(owner, EffectiveLimits(m.cfg.Limits, p.Limits), p.IdleTimeoutMs, onClosed)
	if err != nil {
		return "", err
	}
	return m.startSession(s, func() (*worker, error) {
		// Its packages first: the session counts against the cap meanwhile,
		// and Shutdown stops the installation.
		lease, err := m.sessionPackages(p.Packages)
		if err != nil {
			return nil, err
		}
		s.lease = lease // before adopt, which publishes s
		secrets := sessionSecrets(m.cfg, p)
		w, err := m.bootedWorker(func() (*worker, *protocol.RunError) { return m.sessionWorker(s.lim) }, s.lim, leaseSysPath(lease), secrets)
		if err != nil && w != nil && w.warm { // a warm child lost while waiting: once more, cold
			m.log.Warn("a warm child failed its session boot; opening on a fresh child", "err", err)
			w, err = m.bootedWorker(m.spawnWorker, s.lim, leaseSysPath(lease), secrets)
		}
		return w, err
	})
}

// bootedWorker boots the child get returns in session mode, with secrets
// (nil: none) bound to it for every run of the session. On a failed boot
// the child is gone and returned with the error (for its warm flag).
func (m *Manager) bootedWorker(get func() (*worker, *protocol.RunError), lim protocol.Limits, sysPath []string, secrets []egress.Secret) (*worker, error) {
	w, fail := get()
	if fail != nil {
		return nil, errors.New(fail.Message)
	}
	if m.egress != nil {
		w.secrets = egress.Bind(secrets)
	}
	if err := bootSession(w, withEnv(sessionBootFrame(lim, m.cfg.SessionCPUSeconds, sysPath), w.secrets.Env())); err != nil {
		killWorker(w, m.log)
		return w, err
	}
	w.warm = false // the wall clock of each run starts at its run frame
	return w, nil
}

// sessionWorker gets a child for a new session. It waits for the preloaded
// server (forker.awaitPreload); one whose address space would not fit
// beside the preload starts cold (fitsPreload). In tier process a warm
// child serves when ready. In tier sandbox the child's init must know it
// serves a session (its CPU bound is then the session's lifetime total,
// sandbox.Config.Session), so the warm children, started for runs, do not
// serve: the child is forked (or started) for the session.
func (m *Manager) sessionWorker(lim protocol.Limits) (*worker, *protocol.RunError) {
	if m.forker != nil {
		m.forker.awaitPreload()
	}
	if m.sandbox != nil {
		return m.sandboxSessionWorker(*m.sandbox, lim.AddressSpaceMb)
	}
	if !m.fitsPreload(lim.AddressSpaceMb) {
		return m.spawnCold()
	}
	if w := m.warm.take(false); w != nil {
		return w, nil
	}
	return m.spawnWorker()
}

// startSession gives the registered session s the booted child get
// returns, or ends it (get failed, or shutdown began meanwhile).
func (m *Manager) startSession(s *Session, get func() (*worker, error)) (string, error) {
	defer m.sessionWG.Done()
	w, err := get()
	if err != nil { // w, if any, is already gone
		s.lease.Release()
		m.endSession(s, StateLost, err.Error(), workerExit(err.Error()))
		m.mu.Lock()
		delete(m.ended, s.id) // never issued: the id stays unknown
		m.mu.Unlock()
		return "", err
	}
	if !s.adopt(w) {
		killWorker(w, m.log)
		return "", ErrShuttingDown
	}
	s.freezeLater()
	return s.id, nil
}

// register counts a new session of owner against the daemon's cap and, for
// a lane, against the lane's share of it (Config.MaxSessionsPerLane).
func (m *Manager) register(owner *Lane, lim protocol.Limits, idleMs int64, onClosed func(string, string, string)) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shutting {
		return nil, ErrShuttingDown
	}
	if err := m.capLocked(owner); err != nil {
		return nil, err
	}
	m.sessionWG.Add(1) // done when the open or fork returns: shutdown waits for its child
	idle := m.cfg.SessionIdle
	if idleMs > 0 {
		idle = time.Duration(idleMs) * time.Millisecond
	}
	s := &Session{m: m, owner: owner, id: newSessionID(), lim: lim, idle: idle,
		onClosed: onClosed}
	s.log = m.log.With("session", s.id)
	s.cond = sync.NewCond(&s.mu)
	m.sessions[s.id] = s
	return s, nil
}

// capLocked refuses a new session of owner when the daemon's cap is
// reached, or when owner is a lane holding its share already.
func (m *Manager) capLocked(owner *Lane) *SessionError {
	if len(m.sessions) >= m.cfg.MaxSessions {
		return capErr("CODERUN_MAX_SESSIONS", m.cfg.MaxSessions)
	}
	share := m.cfg.MaxSessionsPerLane
	if owner == nil || share <= 0 {
		return nil
	}
	held := 0
	for _, s := range m.sessions {
		if s.owner == owner {
			held++
		}
	}
	if held >= share {
		return capErr("CODERUN_MAX_SESSIONS_PER_CONNECTION", share)
	}
	return nil
}

func capErr(variable string, n int) *SessionError {
	return &SessionError{Cap: true, Message: "session cap reached (" + variable + "=" + strconv.Itoa(n) + ")"}
}

// newSessionID is an opaque session id: 130 random bits (crypto/rand.Text,
// base32), so that an id says nothing of other sessions or connections and
// cannot be guessed.
func newSessionID() string { return "session-" + rand.Text() }

// bootSession sends a session boot frame and waits for its boot-ack.
func bootSession(w *worker, frame []byte) error {
	deadline := time.Now().Add(sessionBootTimeout)
	w.conn.SetDeadline(deadline)
	defer w.conn.SetDeadline(time.Time{})
	if _, err := w.conn.Write(frame); err != nil {
		return errors.New("failed to boot the session's python process: " + err.Error())
	}
	framer := wireguard.NewFramer(protocol.FrameCap)
	buf := make([]byte, 4096)
	for {
		n, err := w.conn.Read(buf)
		frames, _ := framer.Feed(buf[:n])
		for _, line := range frames {
			f, ok := wireguard.DecodeFrame(line)
			switch {
			case ok && f.Type == protocol.FrameBootAck:
				w.egressLn.serve() // the init's listener exists once the program runs
				return nil
			case ok && f.Type == protocol.FrameDone && f.Error != nil:
				return errors.New("the session's python process refused its limits: " + f.Error.Message)
			}
		}
		if err != nil {
			return errors.New("the session's python process did not acknowledge its boot: " + err.Error())
		}
	}
}

// killWorker kills a child that never served, reaps it and removes its
// directory.
func killWorker(w *worker, log *slog.Logger) {
	w.proc.SignalGroup(syscall.SIGKILL)
	w.closeFiles()
	<-w.exited
	w.closeDir(log)
}

// adopt makes the booted w the session's child and starts its readers; false
// when the session ended meanwhile (shutdown).
func (s *Session) adopt(w *worker) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.w, s.pid = w, w.proc.Pid
	s.held = openHeld(w, s.pid)
	s.cpuMark, _, _ = s.held.usage(false)
	s.cond.Broadcast() // a fork waiting for the child
	go readLoop(w, s)
	go strayLoop(s, fdStdout, w.stdout)
	go strayLoop(s, fdStderr, w.stderr)
	go s.watch(w)
	s.disk = watchDisk(sessionDir(w), w.proc.Family, s.judgeDisk, s.diskOrigin)
	s.armIdleLocked()
	return true
}

// sessionDir is the tree a session's program may write: a sandboxed
// session's home (its forks' homes inside it count against it too), else
// its working directory.
func sessionDir(w *worker) *rundir.Dir {
	if w.home != nil {
		return w.home.root
	}
	return w.wd
}

// judgeDisk compares a measurement of the session's directory with the
// attached run's disk budget, else the session's, and ends that run with
// the error (its outcome loses the session), or between runs loses the
// session with the error's message. The budget and the run it is acted on
// are read together: a run that attaches during a walk is judged by its own.
func (s *Session) judgeDisk(u diskUse) {
	s.mu.Lock()
	r, mb := s.attached, s.lim.MaxDiskMb
	if r != nil {
		mb = r.sm.lim.MaxDiskMb // fixed when the run was made
	}
	s.mu.Unlock()
	e := u.over(mb)
	switch {
	case e == nil:
	case r != nil:
		r.decide(decision{err: e})
	default:
		s.lose(e.Message)
	}
}

// ---- the registry -----------------------------------------------------------

// openLocked is owner's open session id, or nil: another owner's session
// is not owner's to name.
func (m *Manager) openLocked(owner *Lane, id string) *Session {
	if s := m.sessions[id]; s != nil && s.owner == owner {
		return s
	}
	return nil
}

// sessionErrLocked is the refusal for an id owner has no open session by:
// another owner's id, open or ended, is unknown, so that an owner never
// learns whether another's session exists.
func (m *Manager) sessionErrLocked(owner *Lane, id string) *SessionError {
	if e, ok := m.ended[id]; ok && e.owner == owner {
		msg := "session " + strconv.Quote(id) + " is closed (" + e.reason + ")"
		if e.state == StateLost {
			msg = "session " + strconv.Quote(id) + " was lost: " + e.reason
		}
		return &SessionError{State: e.state, Reason: e.reason, Message: msg}
	}
	return &SessionError{State: StateUnknown, Message: "unknown session " + strconv.Quote(id)}
}

// ending is what an ended session leaves to settle: its runs.
type ending struct {
	queued   []*Run             // queued behind the current run, and the current one if not attached
	attached *Run               // the run in the child, if any
	err      *protocol.RunError // what they settle with
}

// endSession ends s once: it leaves the registry (the id answers −32004 with
// state and reason from now on) and refuses new runs; the runs it finds
// settle with err (a current run not yet in the child settles so itself,
// should it reach attach first). ok is false when s had already ended.
func (m *Manager) endSession(s *Session, state, reason string, err *protocol.RunError) (e ending, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[s.id] != s {
		return e, false
	}
	delete(m.sessions, s.id)
	m.ended[s.id] = sessionEnd{state, reason, s.owner}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended, s.endState, s.endReason, s.endErr = true, state, reason, err
	e.err = err
	stopTimer(s.idleTimer)
	s.disk.stop()
	if s.cur != nil && s.attached == nil {
		e.queued = append(e.queued, s.cur)
	}
	for _, q := range s.queue {
		if q.run != nil {
			e.queued = append(e.queued, q.run)
		}
	}
	s.queue = nil
	e.attached = s.attached
	s.cond.Broadcast()
	return e, true
}

// finish settles an ended session's runs with err (queued runs never ran;
// the attached one is decided and its child killed at once), then tears the
// child down: it returns once the child and its descendants are gone and the
// directory is removed.
func (s *Session) finish(e ending) {
	for _, r := range e.queued {
		s.m.fail(r, e.err)
	}
	if r := e.attached; r != nil {
		r.decide(decision{err: e.err})
	}
	s.teardown(e.attached)
}

// teardown SIGKILLs the child's group, lets an attached run settle, then
// closes the descriptors, waits for the reap and the group to empty and
// removes the working directory.
func (s *Session) teardown(attached *Run) {
	defer s.lease.Release() // once the child and its descendants are gone
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	if w == nil {
		return
	}
	w.proc.SignalGroup(syscall.SIGKILL)
	s.mu.Lock()
	stopTimer(s.freezeTimer)
	s.mu.Unlock()
	s.syncFreeze() // the session has ended: what the kill did not reach is continued, as if never frozen
	if attached != nil {
		<-attached.quiescent
	}
	w.closeFiles()
	s.held.close()
	<-w.exited
	if !awaitEmpty(w.proc, s.m.cfg.Grace) {
		s.log.Warn("session child's group still has members after the reap deadline")
	}
	w.closeDir(s.log)
}

// CloseSession ends the session: queued runs and a live one settle abort
// "session closed". The returned wait blocks until the child and its
// descendants are gone.
func (m *Manager) CloseSession(id string) (wait func(), err error) {
	return m.closeSession(nil, id)
}

// closeSession is CloseSession for owner.
func (m *Manager) closeSession(owner *Lane, id string) (wait func(), err error) {
	m.mu.Lock()
	s := m.openLocked(owner, id)
	if s == nil {
		defer m.mu.Unlock()
		return nil, m.sessionErrLocked(owner, id)
	}
	m.mu.Unlock()
	e, ok := m.endSession(s, StateClosed, ReasonClosed, abortError(msgSessionClosed))
	if !ok {
		m.mu.Lock()
		defer m.mu.Unlock()
		return nil, m.sessionErrLocked(owner, id)
	}
	m.sessionWG.Add(1)
	done := make(chan struct{})
	go func() {
		defer m.sessionWG.Done()
		defer close(done)
		s.finish(e)
	}()
	return func() { <-done }, nil
}

// closeSessions ends every session that match selects (all of them at
// shutdown, a lane's when it closes), each with session/closed "shutdown"
// saying note and its runs settling abort msg, and returns once every
// child is gone.
func (m *Manager) closeSessions(match func(*Session) bool, msg, note string) {
	m.mu.Lock()
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		if match(s) {
			all = append(all, s)
		}
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		e, ok := m.endSession(s, StateClosed, ReasonShutdown, abortError(msg))
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.finish(e)
			if s.issued() { // a session still opening is answered by its open's refusal
				s.notify(ReasonShutdown, note)
			}
		}()
	}
	wg.Wait()
}

// lose ends the session as lost (its child died, closed fd 3 or broke the
// protocol between runs), settles its runs and notifies the client.
func (s *Session) lose(msg string) {
	e, ok := s.m.endSession(s, StateLost, msg, workerExit(msg))
	if !ok {
		return
	}
	s.log.Warn("session lost", "reason", msg)
	s.m.sessionWG.Add(1)
	go func() {
		defer s.m.sessionWG.Done()
		s.finish(e)
		if r := e.attached; r != nil {
			<-r.out.delivered // the run's result says it first
		}
		s.notify(ReasonLost, msg)
	}()
}

// issued reports whether the session's id was given to the client (its
// child booted).
func (s *Session) issued() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w != nil
}

func (s *Session) notify(reason, msg string) {
	if s.onClosed != nil {
		s.onClosed(s.id, reason, msg)
	}
}

// ---- runs -------------------------------------------------------------------

// submitSession queues a run on its session (FIFO behind the session's
// current run); the session's head run then queues for a slot like any run.
func (m *Manager) submitSession(lane *Lane, runID string, p protocol.RunParams, c Client, onResult func(protocol.Result)) (*Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shutting {
		return nil, ErrShuttingDown
	}
	s := m.openLocked(lane, p.SessionID)
	if s == nil {
		return nil, m.sessionErrLocked(lane, p.SessionID)
	}
	r := m.newRunIn(lane, s.lim, runID, p, c, onResult)
	r.sm.sess, r.sm.lifetimeCPU = s, m.cfg.SessionCPUSeconds
	m.runs[r] = false
	if s.enqueue(r) {
		m.slotLocked(r)
	}
	return r, nil
}

// enqueue makes r the current run when the session is idle (true: it needs
// a slot now), else queues it.
func (s *Session) enqueue(r *Run) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idleLocked() {
		s.cur = r
		stopTimer(s.idleTimer)
		return true
	}
	s.queue = append(s.queue, queued{run: r})
	return false
}

// attach starts the current run r in the child: its writer (the run frame
// only: the child is booted) and the CPU sampler.
func (s *Session) attach(r *Run) {
	defer r.recoverPanic("start")
	if r.isDecided() {
		r.failStart(nil)
		return
	}
	s.mu.Lock()
	prev, w := s.writerDone, s.w
	s.mu.Unlock()
	if prev != nil {
		<-prev // the last run's writer has returned: fd 3 is the new writer's alone
	}
	// The session's directory persists; out/ is this run's alone, and the
	// run's files are written before its program starts.
	err := s.held.resetOut()
	if err == nil {
		err = stageFiles(w.wd, r.files)
	}
	r.files = nil
	if err != nil {
		r.failStart(workerExit(err.Error()))
		return
	}
	wr := newFDWriter(w.conn, nil, protocol.ReplyQueue)
	done, sampler := make(chan struct{}), &cpuSampler{}
	s.mu.Lock()
	if s.ended || s.dead {
		// An ending that found r current settles it with the same error
		// (finish); whichever comes first wins.
		err := cmp.Or(s.endErr, workerExit("the session's python process is gone"))
		s.mu.Unlock()
		r.failStart(err)
		return
	}
	s.attached, s.writerDone, s.sampler = r, done, sampler
	stopTimer(s.freezeTimer)
	eof := s.eof
	base := s.cpuMark // the last run's settlement or freeze set it; no /proc read on the way to the run frame
	s.mu.Unlock()
	s.syncFreeze() // thawed before the run's clock starts: the run is not billed for it
	r.openEgress(w)
	r.mu.Lock()
	eff := r.sm.step(event{kind: evAttach, w: w, wr: wr, softCPU: r.sm.lim.CPUSeconds, cpuBase: base, eof: eof})
	r.mu.Unlock()
	// Written here when fd 3 is idle (no hand-off to the writer goroutine), and
	// only now: the run is the current one, so its done frame finds it.
	wr.sendRun(withBypassNote(sessionRunFrame(r.sm.program, r.sm.lim, r.bindings), r.m.bypassNote(r.egressPolicy, w)))
	go r.writeLoop(w, wr, done)
	sampler.start(s, w, base, time.Duration(r.sm.lim.CPUSeconds)*time.Second)
	r.perform(eff)
}

// markCPU records the child's CPU time at a kept run's end: the child idles
// until the next run, which counts from there.
func (s *Session) markCPU(cpu time.Duration) {
	s.mu.Lock()
	s.cpuMark = cpu
	s.mu.Unlock()
}

// freezeDelay is how long a session stays idle before its child is frozen:
// a client that sends its next run at once (the common case) finds the
// child running and pays neither the freeze nor the thaw. What the child
// uses meanwhile is billed to no run; it is bounded by the delay.
const freezeDelay = 10 * time.Millisecond

// freezeLater (re)arms the call of syncFreeze freezeDelay from now, off the
// caller's path; attach stops it.
func (s *Session) freezeLater() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freezeTimer == nil {
		s.freezeTimer = time.AfterFunc(freezeDelay, s.syncFreeze)
		return
	}
	s.freezeTimer.Reset(freezeDelay)
}

// syncFreeze stops the child's process tree, or continues it, to match the
// session's state now (docs/containment-start-modes.md §4.3): stopped while no run is
// attached and no fork is under way — waiting for a slot included — and
// running otherwise, and for good once the session has ended. Every change
// of that state is followed by a call, and calls are serialised, so the
// last call applies the latest state. Once frozen, the child's CPU time is
// the next run's base: whatever it used between runs is billed to none.
func (s *Session) syncFreeze() {
	s.freezeMu.Lock()
	defer s.freezeMu.Unlock()
	s.mu.Lock()
	idle := s.w != nil && s.attached == nil && !s.forking && !s.ended && !s.dead
	w := s.w
	s.mu.Unlock()
	switch {
	case idle && s.frozen == nil:
		s.frozen = w.proc.Freeze()
		cpu, _, ok := s.held.usage(false)
		s.mu.Lock()
		if ok && s.attached == nil {
			s.cpuMark = cpu
		}
		s.mu.Unlock()
	case !idle && s.frozen != nil:
		s.frozen.Thaw()
		s.frozen = nil
	}
}

// cpuSampler is a session run's CPU check: every cpuSampleEvery it
// SIGKILLs the child's group once the run has used its CPU budget, in case
// the program raised its own soft limit; the close then classifies the run
// timeout/cpu from the child's rusage (machine.classify). In tier sandbox
// the child is the interpreter, not the namespace's init (child/sandbox,
// session_linux.go): the init lives on and relays the interpreter's own
// status and rusage. It is a timer, not a goroutine: most session runs end
// long before the first check, and starting one per run costs a wake-up.
type cpuSampler struct {
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
}

// start arms the check of a run counted from base, unless stop came first.
func (c *cpuSampler) start(s *Session, w *worker, base, budget time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.t = time.AfterFunc(cpuSampleEvery, func() {
		if used, _, ok := s.held.usage(false); ok && used-base >= budget {
			w.proc.SignalGroup(syscall.SIGKILL)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.stopped {
			c.t.Reset(cpuSampleEvery)
		}
	})
}

// stop ends the checks (a check under way may still finish).
func (c *cpuSampler) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.t != nil {
		c.t.Stop()
	}
}

// account counts a settled run (under the run's lock) and says what its
// result reports of the session.
func (s *Session) account(ran, kept bool, err *protocol.RunError) protocol.SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ran {
		s.runs++
		if !kept && s.loss == "" {
			s.loss = "the session's python process exited"
			if err != nil {
				s.loss = err.Message
			}
		}
	}
	info := protocol.SessionInfo{ID: s.id, Runs: s.runs, Alive: !s.ended && s.loss == ""}
	switch {
	case s.loss != "":
		info.Reason = s.loss
	case s.ended:
		info.Reason = s.endReason
	}
	return info
}

// runSettled is told of every settled run of the session (after its
// result was queued): the session moves on to its next run, or, when the
// run's outcome ended it, ends as lost once the result is delivered.
func (s *Session) runSettled(r *Run, kept *worker) {
	s.mu.Lock()
	if s.cur != r {
		s.removeQueuedLocked(r)
		s.mu.Unlock()
		return
	}
	wasAttached := s.attached == r
	s.cur, s.attached = nil, nil
	if s.sampler != nil {
		s.sampler.stop()
		s.sampler = nil
	}
	loss, dead, closedFD3 := s.loss, s.dead, s.eof[fdConn]
	s.mu.Unlock()
	switch {
	case wasAttached && kept == nil && loss != "":
		if e, ok := s.m.endSession(s, StateLost, loss, workerExit("the session was lost: "+loss)); ok {
			s.lostByRun(r, e, loss)
		}
	case dead: // the child died as the run settled: watch left it to us
		s.lose(exitText(s.w))
	case closedFD3:
		s.lose(msgClosedFD3)
	default:
		s.next()
		s.freezeLater()
	}
}

// lostByRun ends a session whose run's outcome ended it: the run settled
// the child (killed, reaped, directory removed); runs queued behind it
// settle worker-exit, and session/closed follows the run's result.
func (s *Session) lostByRun(r *Run, e ending, loss string) {
	for _, q := range e.queued {
		s.m.fail(q, e.err)
	}
	go func() {
		<-r.out.delivered
		s.notify(ReasonLost, loss)
	}()
}

func (s *Session) removeQueuedLocked(r *Run) {
	for i, q := range s.queue {
		if q.run == r {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			return
		}
	}
}

// idleLocked reports whether nothing holds or waits for the child: a new
// run or fork may start at once.
func (s *Session) idleLocked() bool {
	return s.cur == nil && !s.forking && len(s.queue) == 0
}

// next starts the next queued entry: a run (it queues for a slot), or a
// fork's turn (its fork goes ahead); with none it arms the idle timer.
func (s *Session) next() {
	s.mu.Lock()
	if s.ended || s.cur != nil || s.forking {
		s.mu.Unlock()
		return
	}
	if len(s.queue) == 0 {
		s.armIdleLocked()
		s.mu.Unlock()
		return
	}
	q := s.queue[0]
	s.queue = s.queue[1:]
	if q.fork != nil {
		q.fork.due, s.forking = true, true
		s.cond.Broadcast()
		s.mu.Unlock()
		return
	}
	s.cur = q.run
	s.mu.Unlock()
	s.m.slot(q.run)
}

// armIdleLocked (re)starts the idle timer.
func (s *Session) armIdleLocked() {
	stopTimer(s.idleTimer)
	s.idleTimer = time.AfterFunc(s.idle, s.idleTimeout)
}

// idleTimeout closes the session if it is still idle.
func (s *Session) idleTimeout() {
	s.mu.Lock()
	busy := s.cur != nil || s.forking || len(s.queue) > 0
	s.mu.Unlock()
	if busy {
		return
	}
	e, ok := s.m.endSession(s, StateClosed, ReasonIdle, abortError(msgSessionClosed))
	if !ok {
		return
	}
	s.m.sessionWG.Add(1)
	go func() {
		defer s.m.sessionWG.Done()
		s.finish(e)
		s.notify(ReasonIdle, "no run for "+strconv.FormatInt(s.idle.Milliseconds(), 10)+" ms")
	}()
}

// ---- the child's readers (route) -------------------------------------------

// current is the attached run, if any.
func (s *Session) current() *Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attached
}

// between: the child wrote on fd 3 while no run was attached.
func (s *Session) between() {
	s.lose("the session's python process wrote on fd 3 between runs")
}

// streamEnded records the end of fd's stream, tells the attached run, and loses
// the session when fd 3 ended.
func (s *Session) streamEnded(fd int) {
	s.mu.Lock()
	s.eof[fd] = true
	r := s.attached
	s.mu.Unlock()
	switch {
	case r != nil: // its settlement judges the session (runSettled)
		r.markEOF(fd)
	case fd == fdConn:
		s.lose(s.idleLoss())
	}
}

// idleLoss says why fd 3 ended between runs: usually the child died, and
// its exit (reaped within moments) says how.
func (s *Session) idleLoss() string {
	select {
	case <-s.w.exited:
		return exitText(s.w)
	case <-time.After(exitWait):
		return msgClosedFD3
	}
}

// recoverPanic turns a panic in one of the session's readers into its loss.
func (s *Session) recoverPanic(where string) {
	if v := recover(); v != nil {
		s.log.Error("panic in a session reader", "where", where, "panic", v)
		s.lose("internal daemon error (" + where + ")")
	}
}

// watch reports the child's exit to the attached run, or loses the session.
func (s *Session) watch(w *worker) {
	<-w.exited
	s.mu.Lock()
	s.dead = true
	r := s.attached
	s.mu.Unlock()
	if r != nil { // its settlement judges the session (runSettled)
		r.dispatch(event{kind: evReaped})
		return
	}
	s.lose(exitText(w))
}

// exitText describes a reaped child's end.
func exitText(w *worker) string {
	switch e := w.exit; {
	case w.waitErr != nil:
		return "failed to wait for the session's python process: " + w.waitErr.Error()
	case e.Signaled:
		return "the session's python process was killed by " + e.Signal
	default:
		return "the session's python process exited with code " + strconv.Itoa(e.Code)
	}
}

// ForkSession makes a new session whose child is a fork of src's idle child
// (docs/protocol-sessions.md §11.5). At once it counts the fork against the cap and
// gives it its place in src's FIFO (after the runs and forks accepted
// before it, before those accepted after it); the returned function, which
// the caller must call exactly once, waits for that turn, forks src's child
// into a copy of its working directory and answers the new session's id.
// The fork has src's owner.
func (m *Manager) ForkSession(id string, onClosed func(id, reason, message string)) func() (string, error) {
	return m.forkSession(nil, id, onClosed)
}

// forkSession is ForkSession for owner.
func (m *Manager) forkSession(owner *Lane, id string, onClosed func(id, reason, message string)) func() (string, error) {
	failed := func(err error) func() (string, error) { return func() (string, error) { return "", err } }
	m.mu.Lock()
	src := m.openLocked(owner, id)
	if src == nil {
		defer m.mu.Unlock()
		return failed(m.sessionErrLocked(owner, id))
	}
	m.mu.Unlock()
	if why := m.noFork(); why != "" {
		return failed(errors.New(why))
	}
	lease, err := src.lease.Again() // the fork imports from the source's set
	if err != nil {
		return failed(err)
	}
	s, err := m.register(owner, src.lim, src.idle.Milliseconds(), onClosed)
	if err != nil {
		lease.Release()
		return failed(err)
	}
	s.lease = lease
	src.mu.Lock()
	if src.disk != nil {
		s.diskOrigin = src.disk.since
	} else {
		s.diskOrigin = src.diskOrigin
	}
	src.mu.Unlock()
	turn := src.queueFork()
	return func() (string, error) {
		return m.startSession(s, func() (*worker, error) { return src.fork(turn, m.cfg.TempDir) })
	}
}

// ForkAvailable reports whether session/fork is served: a session child
// can be forked and adopted when its reaper hands its forks over — the fork
// server in tier process (start mode fork), the namespace's init in tier
// sandbox.
func (m *Manager) ForkAvailable() bool { return m.noFork() == "" }

func (m *Manager) noFork() string {
	if m.sandbox == nil && m.forker == nil {
		return "session/fork needs the fork server (CODERUN_START_MODE=fork)"
	}
	return ""
}

// fork waits for turn (queueFork), then forks s's child into a copy of its
// working directory.
func (s *Session) fork(turn *forkTurn, tempDir string) (*worker, error) {
	if !s.awaitForkTurn(turn) {
		s.m.mu.Lock()
		defer s.m.mu.Unlock()
		return nil, s.m.sessionErrLocked(s.owner, s.id)
	}
	s.mu.Lock()
	src, prev := s.w, s.writerDone
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.forking = false
		s.mu.Unlock()
		s.next()
		s.freezeLater()
	}()
	if prev != nil {
		<-prev // the last run's writer has returned: fd 3 is the fork frame's alone
	}
	s.syncFreeze() // the child reads the fork frame and forks: thawed while forking
	if src.home != nil {
		return s.m.forkSandboxed(src, forkCopyBudget(s.lim.MaxDiskMb))
	}
	wd, err := rundir.Make(tempDir) // forkWorker copies src's working directory into it
	if err != nil {
		return nil, errors.New("session/fork: " + pathless(err))
	}
	w, err := forkWorkerMax(src, wd, forkCopyBudget(s.lim.MaxDiskMb), s.m.egress)
	if err != nil {
		dropDir(wd, s.log)
		return nil, err
	}
	return w, nil
}

// forkSandboxed forks src, a sandboxed session's child, into a home of its
// own under src's (sandbox.go).
func (m *Manager) forkSandboxed(src *worker, maxCopy int64) (*worker, error) {
	h, wd, rules, err := m.forkHome(src)
	if err != nil {
		return nil, errors.New("session/fork: " + pathless(err))
	}
	w, err := forkWorkerMax(src, wd, maxCopy, m.egress, rules)
	rules.Close()
	if err != nil {
		dropDir(wd, m.log)
		h.release(m.log)
		return nil, err
	}
	w.home = h
	return w, nil
}

// queueFork gives a fork its turn behind s's current run and queued
// entries: due at once when s is idle.
func (s *Session) queueFork() *forkTurn {
	s.mu.Lock()
	defer s.mu.Unlock()
	stopTimer(s.idleTimer)
	turn := &forkTurn{}
	if s.idleLocked() {
		turn.due, s.forking = true, true
	} else {
		s.queue = append(s.queue, queued{fork: turn})
	}
	return turn
}

// awaitForkTurn waits until turn is due and s's child booted (s.forking is
// then set: s.next starts nothing until the fork clears it); false when s
// ended first.
func (s *Session) awaitForkTurn(turn *forkTurn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.ended && (!turn.due || s.w == nil) { // adopt signals the booted child
		s.cond.Wait()
	}
	if s.ended && turn.due { // the session ended as the turn came: nothing runs behind it
		s.forking = false
	}
	return !s.ended
}
