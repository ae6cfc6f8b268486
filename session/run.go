package session

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
)

// Run is one accepted run. Its fields are in three parts: the immutable
// configuration, the state machine (sm, guarded by mu; every change goes
// through dispatch), and the helpers that own their synchronisation: the
// outbox (out) and, per child, the fd-3 writer (sm.wr).
type Run struct {
	// configuration, fixed at creation
	m        *Manager
	lane     *Lane // nil: submitted on the Manager itself (fair.go)
	id       string
	client   Client
	onResult func(protocol.Result)
	bindings []protocol.Namespace // for the boot frame
	log      *slog.Logger

	mu sync.Mutex
	sm machine

	out       *outbox
	quiescent chan struct{} // closed once the run is forgotten
	files     []protocol.InputFile
	// lateMarker is the outputs marker due to out/ files, set by settled
	// before the result's gate opens and streamed just before the result.
	lateMarker *protocol.OutputEvent
	collected  collected  // out/ as read for this run (Run.collect)
	lent       lendSlot   // a call's work lent to the fd-3 reader (lend.go)
	disk       *diskWatch // a fresh run's directory measured (disk.go), from attach to settlement; under mu
	// packages are a fresh run's requests (nil: none), installed before it
	// gets a child; lease holds the installed set until the run is
	// forgotten; stopInstall ends the wait for the installation once the
	// run is decided (packages.go). Both under mu.
	packages    []wheelset.Requirement
	lease       *wheelset.Lease
	stopInstall context.CancelFunc
	// egressPolicy is the run's egress policy (nil with no proxy); egress
	// its grant on the proxy while it has a child, under mu (egress.go).
	egressPolicy *egress.Policy
	egress       *egress.Grant
}

// newRun creates a run whose limits are base tightened by its own.
func newRun(m *Manager, base protocol.Limits, runID string, p protocol.RunParams, c Client, onResult func(protocol.Result)) *Run {
	lim := EffectiveLimits(base, p.Limits)
	r := &Run{
		m: m, id: runID, client: c, onResult: onResult, bindings: p.Bindings, files: p.Files,
		packages:  requirements(p.Packages),
		log:       m.log.With("run", runID),
		quiescent: make(chan struct{}),
	}
	r.out = newOutbox(r)
	r.egressPolicy = runEgressPolicy(m.cfg, p)
	r.sm = machine{
		lim: lim, known: knownBindings(p.Bindings), program: p.Program,
		grace: m.cfg.Grace, graceKill: !m.noGraceKill,
		post: func(ev event) { r.dispatch(ev) },
		out:  r.out,
	}
	if p.Stream {
		r.sm.onEvent = func(ev protocol.LogEvent) { // called under r.mu, in ledger order
			r.out.push(outItem{ev: &ev})
		}
		r.sm.onOutput = func(ev protocol.OutputEvent) { // called under r.mu, in frame order
			r.out.push(outItem{output: &ev})
		}
	}
	r.sm.init(time.Now())
	return r
}

// knownBindings indexes the declared bindings: global → name → the typed
// function's checks (nil for an untyped function).
func knownBindings(nss []protocol.Namespace) map[string]map[string]protocol.Checker {
	known := make(map[string]map[string]protocol.Checker, len(nss))
	for _, ns := range nss {
		names := make(map[string]protocol.Checker, len(ns.Names))
		for j, n := range ns.Names {
			names[n] = nil
			if ns.Checks != nil {
				names[n] = ns.Checks[j]
			}
		}
		known[ns.Global] = names
	}
	return known
}

// Cancel decides the run abort "run cancelled by the client" (queued or
// live). Repeats and cancels of settled runs are no-ops.
func (r *Run) Cancel() { r.m.abort(r, protocol.MsgCancelled) }

// dispatch steps the machine with ev under r.mu, then performs the effects;
// it returns them for the query events' answers.
func (r *Run) dispatch(ev event) effects {
	r.mu.Lock()
	eff := r.sm.step(ev)
	if eff.decided && r.stopInstall != nil {
		r.stopInstall()
	}
	r.mu.Unlock()
	r.perform(eff)
	return eff
}

// decide proposes a decision (the first wins).
func (r *Run) decide(d decision) { r.dispatch(event{kind: evDecide, d: d}) }

// isDecided reports whether the run has been decided.
func (r *Run) isDecided() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sm.decided()
}

// perform carries out one step's effects, in the order the contract wants:
// kill before settle, the directory removed before the result is let through.
func (r *Run) perform(eff effects) {
	if eff.decided {
		r.log.Debug("decided", "sinceHandoff", eff.sinceHandoff)
	}
	if eff.flush {
		go r.out.flush()
	}
	if w := eff.kill; w != nil {
		w.releaseWriter()
		w.proc.SignalGroup(syscall.SIGTERM)
	}
	if w := eff.sigkill; w != nil {
		w.proc.SignalGroup(syscall.SIGKILL)
	}
	if w := eff.removeEarly; w != nil {
		w.removeEarly(func() { r.collect(w) })
	}
	if c := eff.unknown; c != nil {
		r.reply(eff.wr, replyErr(c.id, unknownBindingMessage(c.global, c.name, r.sm.lim.MaxValueBytes)))
	}
	if c := eff.refused; c != nil {
		r.reply(eff.wr, replyTypeErr(c.id, c.refusal))
	}
	if w := eff.restart; w != nil {
		r.log.Warn(logLostBeforeBoot, "pid", w.proc.Pid, "exit", w.exit, "waitErr", w.waitErr)
		go r.restart(w)
	}
	if eff.settle {
		r.settled(eff)
	}
}

// settled removes the run directory, lets the result through, frees the
// slot and waits for quiescence.
func (r *Run) settled(eff effects) {
	w := eff.settleW
	r.log.Debug("settled", "sinceHandoff", eff.sinceHandoff)
	r.mu.Lock()
	r.disk.stop()
	r.mu.Unlock()
	r.closeEgress(eff.res)
	r.completeResult(cmp.Or(w, eff.kept), eff.res) // a kept session child's out/ is this run's too
	if w != nil {
		w.closeFiles()
		if s := r.sm.sess; s != nil {
			s.held.close() // the run's outcome ended its session: the child is settled here
		}
		w.removeDir(r.log)
	}
	if eff.kept != nil {
		s := r.sm.sess
		s.markCPU(sessionStats(&eff.res.Stats, s.held, r.sm.cpuBase)) // held and cpuBase are fixed once attached
	}
	close(eff.staged)
	go r.out.flush()
	r.m.released(r)
	if w != nil {
		w.giveBackPlace()
	}
	if s := r.sm.sess; s != nil {
		s.runSettled(r, eff.kept)
	}
	go r.quiesce(w)
}

// ---- start ----------------------------------------------------------------

// start runs in its own goroutine once the run left the queue.
func (r *Run) start() {
	if s := r.sm.sess; s != nil {
		s.attach(r)
		return
	}
	defer r.recoverPanic("start")
	if fail := r.installPackages(); fail != nil {
		r.failStart(fail)
		return
	}
	r.startOn(func() (*worker, *protocol.RunError) {
		if !r.m.fitsPreload(r.sm.lim.AddressSpaceMb) {
			return r.m.spawnCold()
		}
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
	began := time.Now()
	w, fail := get()
	if fail != nil {
		r.failStart(fail)
		return
	}
	if o, ok := r.client.(ChildObserver); ok {
		o.ChildStarted(began, time.Now())
	}
	err := stageFiles(w.wd, r.files) // before the boot frame, so before the program
	r.files = nil
	r.attach(w)
	if err != nil {
		r.decide(decision{err: workerExit(err.Error())})
	}
}

// failStart settles a run that never got a child.
func (r *Run) failStart(fail *protocol.RunError) {
	r.dispatch(event{kind: evStartFailed, d: decision{err: fail}})
}

// attach hands the run to a worker (arming the wall timer for a cold child)
// and starts its fd-3 writer (boot first), the fd-3 reader, the stray
// readers and the reaper watch.
func (r *Run) attach(w *worker) {
	r.runSecrets(w)
	boot := withEnv(withBypassNote(bootFrame(r.sm.lim, r.bindings, leaseSysPath(r.lease)), r.m.bypassNote(r.egressPolicy, w)), w.secrets.Env())
	wr := newFDWriter(w.conn, boot, protocol.ReplyQueue)
	r.openEgress(w)
	mb := r.sm.lim.MaxDiskMb
	r.mu.Lock()
	eff := r.sm.step(event{kind: evAttach, w: w, wr: wr, softCPU: child.EffectiveSoftCPU(r.sm.lim.CPUSeconds)})
	r.disk.stop() // a restart's lost child's
	r.disk = watchDisk(w.wd, w.proc.Family, func(u diskUse) {
		if e := u.over(mb); e != nil {
			r.decide(decision{err: e})
		}
	}, time.Time{})
	r.mu.Unlock()
	go r.writeLoop(w, wr, w.writerDone)
	go readLoop(w, r)
	go strayLoop(r, fdStdout, w.stdout)
	go strayLoop(r, fdStderr, w.stderr)
	go r.watch(w)
	r.perform(eff)
}

// logLostBeforeBoot is the daemon's log message for each restart.
const logLostBeforeBoot = "the warm child was lost before boot; the run starts on a fresh child"

// restart retires the lost child w — its writer gone, its descriptors closed,
// its directory removed, its pool place given back — and starts the run on a
// cold child (the pool's other children may share its fate). The wall clock
// starts again with the new child.
func (r *Run) restart(w *worker) {
	defer r.recoverPanic("start")
	w.proc.SignalGroup(syscall.SIGKILL) // a child whose relay failed may still be dying
	w.releaseWriter()
	<-w.writerDone
	w.closeFiles()
	w.closeDir(r.log)
	w.giveBackPlace()
	r.startOn(r.m.spawnWorker)
}

// quiesce waits for w's process group to empty (awaitEmpty), removes the run
// directory again, and forgets the run.
func (r *Run) quiesce(w *worker) {
	defer r.forget()
	if w == nil {
		return
	}
	// A same-group survivor may have recreated files in the run directory
	// after settlement removed it: remove it again once the group is gone.
	defer w.closeDir(r.log)
	if !awaitEmpty(w.proc, r.m.cfg.Grace) {
		r.log.Warn("process group still has members after the reap deadline; forgetting the run")
	}
}

// processGroup is what quiescence needs of a child's process group.
type processGroup interface {
	GroupEmpty() bool
	SignalGroup(sig syscall.Signal)
}

// awaitEmpty polls g every 50 ms until it is empty; at grace + 2000 ms (from
// the call, made at settlement) it SIGKILLs the group again and allows one
// more 2000 ms. It reports whether the group emptied (docs/child-protocol-daemon.md §4.6).
func awaitEmpty(g processGroup, grace time.Duration) bool {
	deadline := time.Now().Add(grace + protocol.CloseMargin)
	killed := false
	tick := time.NewTicker(protocol.GroupPoll)
	defer tick.Stop()
	for {
		if g.GroupEmpty() {
			return true
		}
		if now := time.Now(); !now.Before(deadline) {
			if killed {
				return false
			}
			g.SignalGroup(syscall.SIGKILL)
			killed, deadline = true, now.Add(protocol.CloseMargin)
		}
		<-tick.C
	}
}

// forget: the run is QUIESCENT; stop the grace SIGKILL, leave the live set.
func (r *Run) forget() {
	r.dispatch(event{kind: evQuiescent})
	r.mu.Lock()
	r.lease.Release()
	r.mu.Unlock()
	close(r.quiescent)
	r.m.forget(r)
}

// watch reports the child's reap to the machine.
func (r *Run) watch(w *worker) {
	defer r.recoverPanic("reaper")
	<-w.exited
	r.dispatch(event{kind: evReaped})
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
