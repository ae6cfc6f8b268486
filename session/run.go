package session

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// phase is where a run stands before its decision (CHILD-CONTRACT §4.6:
// QUEUED → LIVE → DECIDED → SETTLED → QUIESCENT; decided/settled/quiescent
// are tracked by their own flags and channels).
type phase int

const (
	phaseQueued   phase = iota // in the Manager's FIFO
	phaseStarting              // dequeued; staging, spawning or taking a warm child
	phaseLive                  // a worker is attached (or the start failed: w == nil)
)

func (p phase) String() string {
	switch p {
	case phaseQueued:
		return "queued"
	case phaseStarting:
		return "starting"
	default:
		return "live"
	}
}

// Stream indexes for the three descriptors that must reach end of stream.
const (
	fdConn   = 0
	fdStdout = 1
	fdStderr = 2
)

// decision is the decided outcome (value or error) before logs and stats.
type decision struct {
	value    []byte // canonical, when hasValue
	hasValue bool
	err      *protocol.RunError
	lost     bool // the boot or run frame could not be written (a loss before boot-ack if not acked)
}

// call is one accepted, known binding call.
type call struct {
	id           int64
	global, name string
	args         []byte
	cancel       func()
	answered     bool
}

// outItem is one ordered delivery to the client.
type outItem struct {
	ev      *protocol.LogEvent
	call    *call
	cancels []func()
	result  *protocol.Result
	// staged is closed once the run directory is gone: the response must
	// never reach the client while the directory still exists (C25).
	staged chan struct{}
}

// effects are side effects computed under r.mu and run after unlocking.
type effects []func()

func (e effects) run() {
	for _, f := range e {
		f()
	}
}

// Run is one accepted run.
type Run struct {
	m        *Manager
	id       string
	p        protocol.RunParams
	lim      protocol.Limits
	known    map[string]map[string]bool
	client   Client
	onResult func(protocol.Result)
	log      *slog.Logger
	accepted time.Time

	sendMu sync.Mutex // held while delivering outbox items (ordered)

	mu        sync.Mutex
	phase     phase
	dequeued  time.Time
	handoff   time.Time
	w         *worker
	softCPU   int64
	decided   bool
	dec       decision
	settled   bool
	abandoned bool // close deadline passed: pipes abandoned
	reaped    bool
	eof       [3]bool
	// tailAdmitted marks the stray pipes whose final residual reached the
	// ledger (admitted only after fd 3 ended, see admitStrayTailsLocked).
	tailAdmitted [3]bool
	capture      *wireguard.Capture
	onEvent      func(protocol.LogEvent) // the capture's stream callback (nil unless stream)
	restarted    bool                    // moved once to a fresh child (lostBeforeBootLocked)

	wallTimer, killTimer, closeTimer *time.Timer

	// fd-3 protocol state.
	bootAcked    bool
	nextID       int64
	calls        map[int64]*call
	inflight     int
	bindingCalls int64

	// fd-3 writer state (wire.go).
	raw       syscall.RawConn // fd 3 for non-blocking writes; nil until attached
	wcond     *sync.Cond
	wBoot     []byte
	wRun      []byte
	wRest     []byte   // the unwritten tail of a reply cut short by a full socket
	wq        [][]byte // replies waiting (cap protocol.ReplyQueue)
	wbusy     bool     // a goroutine is writing to fd 3
	wstop     bool
	wdead     bool
	out       []outItem
	delivered chan struct{} // closed once onResult returned
	quiescent chan struct{} // closed once the run is forgotten
}

func newRun(m *Manager, runID string, p protocol.RunParams, c Client, onResult func(protocol.Result)) *Run {
	r := &Run{
		m: m, id: runID, p: p, client: c, onResult: onResult,
		lim:       effectiveLimits(m.cfg.Limits, p.Limits),
		known:     make(map[string]map[string]bool, len(p.Bindings)),
		log:       m.log.With("run", runID),
		accepted:  time.Now(),
		calls:     make(map[int64]*call),
		delivered: make(chan struct{}),
		quiescent: make(chan struct{}),
	}
	for _, ns := range p.Bindings {
		names := make(map[string]bool, len(ns.Names))
		for _, n := range ns.Names {
			names[n] = true
		}
		r.known[ns.Global] = names
	}
	r.wcond = sync.NewCond(&r.mu)
	if p.Stream {
		r.onEvent = func(ev protocol.LogEvent) { // called under r.mu, in ledger order
			r.out = append(r.out, outItem{ev: &ev})
		}
	}
	r.capture = wireguard.NewCapture(r.lim.MaxLogBytes, r.onEvent)
	return r
}

// Cancel decides the run abort "run cancelled by the client" (queued or
// live). Repeats and cancels of settled runs are no-ops.
func (r *Run) Cancel() { r.m.abort(r, protocol.MsgCancelled) }

// ---- start ----------------------------------------------------------------

// start runs in its own goroutine once the run left the queue.
func (r *Run) start() {
	defer r.recoverPanic("start")
	r.startOn(func() (*worker, *protocol.RunError) {
		if w := r.m.takeWarm(); w != nil {
			return w, nil
		}
		return r.m.spawnWorker()
	})
}

// startOn attaches the run to the worker get returns, unless the run was
// decided (cancelled, shut down) before; a failure to get one settles it.
func (r *Run) startOn(get func() (*worker, *protocol.RunError)) {
	if r.isDecided() {
		r.failStart(nil)
		return
	}
	w, fail := get()
	if fail != nil {
		r.failStart(fail)
		return
	}
	r.attach(w)
}

// failStart settles a run that never got a child.
func (r *Run) failStart(fail *protocol.RunError) {
	var eff effects
	func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.phase = phaseLive
		eff = append(eff, r.decideLocked(decision{err: fail})...)
		eff = append(eff, r.settleLocked()...)
	}()
	eff.run()
}

// attach hands the run to a worker: arm the wall timer, start the writer
// (boot first), the fd-3 reader, the stray readers and the reaper watch.
func (r *Run) attach(w *worker) {
	var eff effects
	func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.w = w
		r.phase = phaseLive
		r.handoff = time.Now()
		r.softCPU = child.EffectiveSoftCPU(r.lim.CPUSeconds)
		r.wBoot = bootFrame(r.lim, r.p.Bindings)
		if raw, err := w.conn.SyscallConn(); err == nil {
			r.raw = raw
		}
		switch {
		case r.decided:
			eff = r.killLocked() // decided while starting (cancel, shutdown)
		case !w.warm:
			r.armWallLocked() // cold: the wall clock starts at spawn
		}
	}()
	go r.writeLoop(w)
	go r.readLoop(w)
	go r.strayLoop(w, fdStdout, w.stdout)
	go r.strayLoop(w, fdStderr, w.stderr)
	go r.watch(w)
	eff.run()
}

// ---- decide / kill / close / settle --------------------------------------

// armWallLocked starts the wall clock: at spawn for a cold child, at the boot
// write for a warm one (§4.3 step 5).
func (r *Run) armWallLocked() {
	r.handoff = time.Now()
	r.wallTimer = time.AfterFunc(time.Duration(r.lim.MaxWallMs)*time.Millisecond, r.onWall)
}

func (r *Run) onWall() { r.decide(decision{err: wallTimeout(r.lim.MaxWallMs)}) }

func (r *Run) decide(d decision) {
	var eff effects
	func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		eff = r.decideLocked(d)
	}()
	eff.run()
}

// decideLocked: the first decision wins (§4.6).
func (r *Run) decideLocked(d decision) effects {
	if r.decided {
		return nil
	}
	r.decided, r.dec = true, d
	r.log.Debug("decided", "error", d.err != nil, "sinceHandoff", time.Since(r.handoff))
	if r.wallTimer != nil {
		r.wallTimer.Stop()
	}
	r.capture.CloseHold()
	var cancels []func()
	for _, c := range r.calls {
		if c.cancel != nil {
			cancels = append(cancels, c.cancel)
		}
	}
	r.calls = make(map[int64]*call)
	r.inflight = 0
	r.wstop = true
	r.wcond.Broadcast()
	var eff effects
	if len(cancels) > 0 {
		r.out = append(r.out, outItem{cancels: cancels})
	}
	if len(r.out) > 0 {
		eff = append(eff, func() { go r.flush() })
	}
	switch {
	case r.w != nil:
		eff = append(eff, r.killLocked()...)
	case r.phase == phaseStarting:
		// the starting goroutine kills the child it gets, or settles
	default:
		eff = append(eff, r.settleLocked()...)
	}
	return eff
}

// killLocked starts the kill escalation: SIGTERM now, SIGKILL after the
// grace, and the close deadline at grace + 2000 ms.
func (r *Run) killLocked() effects {
	w := r.w
	grace := r.m.cfg.Grace
	if !r.m.noGraceKill {
		r.killTimer = time.AfterFunc(grace, func() { w.proc.SignalGroup(syscall.SIGKILL) })
	}
	r.closeTimer = time.AfterFunc(grace+protocol.CloseMargin, func() { r.onCloseDeadline(w) })
	return effects{func() {
		w.releaseWriter()
		w.proc.SignalGroup(syscall.SIGTERM)
	}}
}

// onCloseDeadline: flush stray residuals, abandon the pipes, settle — unless
// the run has moved on from w (restartLocked).
func (r *Run) onCloseDeadline(w *worker) {
	var eff effects
	func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.settled || r.w != w {
			return
		}
		r.capture.FlushStray()
		r.abandoned = true
		eff = r.settleLocked()
	}()
	eff.run()
}

// checkCloseLocked: close = reaped and fd 3, stdout, stderr at EOF. The three
// EOFs before the reap start removing the run directory early.
func (r *Run) checkCloseLocked() effects {
	if r.settled || r.w == nil || !r.eof[fdConn] || !r.eof[fdStdout] || !r.eof[fdStderr] {
		return nil
	}
	if !r.reaped {
		return effects{r.w.removeEarly}
	}
	if r.lostBeforeBootLocked() {
		return r.restartLocked()
	}
	var eff effects
	if !r.decided {
		eff = r.decideLocked(decision{err: r.classifyLocked()})
	}
	return append(eff, r.settleLocked()...)
}

// classifyLocked decides a close without a prior decision (§4.8).
func (r *Run) classifyLocked() *protocol.RunError {
	w := r.w
	if w.waitErr != nil {
		return workerExit("failed to wait for python subprocess: " + w.waitErr.Error())
	}
	e := w.exit
	if e.Signaled && (e.Signal == "SIGXCPU" || e.Signal == "SIGKILL" && cpuAtLeast(e.CPU, r.softCPU)) {
		return cpuTimeout(r.lim.CPUSeconds)
	}
	return exitedEarly(e.Code, e.Signal, e.Signaled)
}

// cpuAtLeast reports cpu >= soft seconds without overflowing a Duration.
func cpuAtLeast(cpu time.Duration, soft int64) bool {
	return cpu.Nanoseconds()/int64(time.Second) >= soft
}

// lostBeforeBootLocked: the run's warm child has ended before acknowledging
// boot, undecided or with only its boot write failed, leaving nothing in the
// ledger and making no call. No program code has run (the run frame follows
// boot-ack): the child was lost while waiting in the pool or just after (its
// fork server died, say), so the run moves to a fresh child, once.
func (r *Run) lostBeforeBootLocked() bool {
	return r.w.warm && !r.restarted && !r.bootAcked && (!r.decided || r.dec.lost) &&
		r.bindingCalls == 0 && len(r.capture.Entries()) == 0
}

// logLostBeforeBoot is the daemon's log message for each restart.
const logLostBeforeBoot = "the warm child was lost before boot; the run starts on a fresh child"

// restartLocked takes the run back to starting: a decision from now on
// (cancel, shutdown) is the restart's to settle, as for any starting run. The
// lost child's writer is told to stop; the effect retires the child and
// starts the run again.
func (r *Run) restartLocked() effects {
	w := r.w
	r.restarted = true
	r.log.Warn(logLostBeforeBoot, "pid", w.proc.Pid, "exit", w.exit, "waitErr", w.waitErr)
	for _, t := range []*time.Timer{r.wallTimer, r.killTimer, r.closeTimer} {
		if t != nil {
			t.Stop()
		}
	}
	r.wallTimer, r.killTimer, r.closeTimer = nil, nil, nil
	r.w, r.raw, r.phase = nil, nil, phaseStarting
	r.decided, r.dec = false, decision{}
	// The lost child's readers and reaper are done (close came); its writer
	// may still be waiting for a frame.
	r.reaped, r.eof, r.tailAdmitted = false, [3]bool{}, [3]bool{}
	r.capture = wireguard.NewCapture(r.lim.MaxLogBytes, r.onEvent)
	r.wstop = true
	r.wcond.Broadcast()
	return effects{func() { go r.restart(w) }}
}

// restart retires the lost child w — its writer gone, its descriptors closed,
// its directory removed, its pool place given back — resets the writer and
// starts the run on a cold child (the pool's other children may share its
// fate). The wall clock starts again with the new child.
func (r *Run) restart(w *worker) {
	defer r.recoverPanic("start")
	w.proc.SignalGroup(syscall.SIGKILL) // a child whose relay failed may still be dying
	w.releaseWriter()
	<-w.writerDone
	w.closeFiles()
	w.removeDir(r.log)
	w.giveBackPlace()
	r.mu.Lock()
	r.wBoot, r.wRun, r.wRest, r.wq = nil, nil, nil, nil
	r.wbusy, r.wdead, r.wstop = false, false, r.decided
	r.mu.Unlock()
	r.startOn(r.m.spawnWorker)
}

// settleLocked: once; assemble the result and queue it behind every earlier
// client delivery; remove the run directory first (effects).
func (r *Run) settleLocked() effects {
	if r.settled {
		return nil
	}
	r.settled = true
	r.log.Debug("settled", "sinceHandoff", time.Since(r.handoff), "reaped", r.reaped, "eof", r.eof, "abandoned", r.abandoned)
	if r.closeTimer != nil {
		r.closeTimer.Stop()
	}
	now := time.Now()
	res := protocol.Result{Logs: r.capture.Entries(), Error: r.dec.err}
	if res.Logs == nil {
		res.Logs = []string{}
	}
	if r.dec.err == nil && r.dec.hasValue {
		res.Value = r.dec.value
	}
	res.Stats = r.statsLocked(now)
	w := r.w
	staged := make(chan struct{})
	r.out = append(r.out, outItem{result: &res, staged: staged})
	return effects{func() {
		if w != nil {
			w.closeFiles()
			w.removeDir(r.log)
		}
		close(staged)
		go r.flush()
		r.m.released(r)
		if w != nil {
			w.giveBackPlace()
		}
		go r.quiesce(w)
	}}
}

func (r *Run) statsLocked(now time.Time) protocol.Stats {
	s := protocol.Stats{BindingCalls: r.bindingCalls, LogBytes: r.capture.Charged()}
	switch {
	case r.w != nil:
		s.QueueMs = r.dequeued.Sub(r.accepted).Milliseconds()
		s.WallMs = now.Sub(r.handoff).Milliseconds()
	case r.phase == phaseQueued:
		s.QueueMs = now.Sub(r.accepted).Milliseconds()
	default: // never got a child
		s.QueueMs = now.Sub(r.accepted).Milliseconds()
	}
	if r.reaped && r.w.waitErr == nil {
		s.CPUMs = r.w.exit.CPU.Milliseconds()
		s.MaxRssKb = r.w.exit.MaxRSSKb
	}
	return s
}

// quiesce polls the group every 50 ms until it is empty; at settle + grace +
// 2000 ms it SIGKILLs again and allows one more 2000 ms; then forgets.
func (r *Run) quiesce(w *worker) {
	defer r.forget()
	if w == nil {
		return
	}
	// A same-group survivor may have recreated files in the run directory
	// after settlement removed it: remove it again once the group is gone.
	defer func() { removeDir(w.dir, r.log) }()
	deadline := time.Now().Add(r.m.cfg.Grace + protocol.CloseMargin)
	killed := false
	tick := time.NewTicker(protocol.GroupPoll)
	defer tick.Stop()
	for {
		if w.proc.GroupEmpty() {
			return
		}
		if now := time.Now(); !now.Before(deadline) {
			if killed {
				r.log.Warn("process group still has members after the reap deadline; forgetting the run")
				return
			}
			w.proc.SignalGroup(syscall.SIGKILL)
			killed, deadline = true, now.Add(protocol.CloseMargin)
		}
		<-tick.C
	}
}

// forget: the run is QUIESCENT; stop the grace SIGKILL, leave the live set.
func (r *Run) forget() {
	r.mu.Lock()
	if r.killTimer != nil {
		r.killTimer.Stop()
	}
	r.mu.Unlock()
	close(r.quiescent)
	r.m.forget(r)
}

// ---- reaping --------------------------------------------------------------

func (r *Run) watch(w *worker) {
	defer r.recoverPanic("reaper")
	<-w.exited
	var eff effects
	func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reaped = true
		eff = r.checkCloseLocked()
	}()
	eff.run()
}

// ---- panics ---------------------------------------------------------------

// recoverPanic turns a panic in one of the run's goroutines into the run's
// worker-exit (Appendix B 14).
func (r *Run) recoverPanic(where string) {
	v := recover()
	if v == nil {
		return
	}
	r.log.Error("panic in a run goroutine", "where", where, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	r.decide(decision{err: workerExit(fmt.Sprintf("internal daemon error (%s): %v", where, v))})
	if where == "start" {
		r.failStart(workerExit(fmt.Sprintf("internal daemon error (%s): %v", where, v)))
	}
}

// removeDir removes a run directory, logging (never reporting) failures.
func removeDir(dir string, log *slog.Logger) {
	if dir == "" {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		log.Error("failed to remove a run directory", "dir", dir, "err", err)
	}
}
