package session

import (
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// state is where a run stands in the settlement state machine
// (docs/child-protocol-daemon.md §4.6: QUEUED → LIVE → DECIDED → SETTLED → QUIESCENT), with
// STARTING between QUEUED and LIVE while a child is being got.
type state uint8

const (
	stateQueued    state = iota // in the Manager's FIFO
	stateStarting               // dequeued; staging, spawning or taking a warm child
	stateLive                   // a child is attached and no decision yet
	stateDecided                // the outcome is fixed; waiting for close or the close deadline
	stateSettled                // the result is queued for the client; waiting for the group to empty
	stateQuiescent              // forgotten
)

func (s state) String() string {
	switch s {
	case stateQueued:
		return "queued"
	case stateStarting:
		return "starting"
	case stateLive:
		return "live"
	case stateDecided:
		return "decided"
	case stateSettled:
		return "settled"
	case stateQuiescent:
		return "quiescent"
	}
	return "state(?)"
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
	done     bool // carried by the child's done frame
}

// keepsSession reports whether a session run decided d leaves its session
// alive (docs/protocol-sessions.md §11.2): the program finished and the child said so,
// with a value, an exception, or a value the daemon refused.
func (d decision) keepsSession() bool {
	if !d.done {
		return false
	}
	if d.err == nil {
		return true
	}
	switch d.err.Kind {
	case protocol.KindException, protocol.KindInvalidOutput, protocol.KindOutputLimit:
		return true
	}
	return false
}

// call is one accepted, known binding call.
type call struct {
	id           int64
	global, name string
	args         []byte
	check        protocol.Checker // the typed function's schemas; nil when untyped
	refusal      string           // the arguments broke the parameters schema: the TypeError's message
	cancel       func()
	answered     bool
}

// eventKind names what happened to a run.
type eventKind uint8

const (
	evDequeue       eventKind = iota // left the queue; a child is being got
	evAttach                         // w (with its writer wr, soft RLIMIT_CPU softCPU; in a session cpuBase and eof) is the run's child
	evStartFailed                    // no child: d.err (nil when decided before)
	evDecide                         // d is a candidate decision (the first wins)
	evWall                           // the wall timer fired
	evGraceKill                      // the grace after SIGTERM passed for w
	evCloseDeadline                  // the close deadline passed for w
	evBootWritten                    // w's writer is about to write the boot frame
	evWriteFailed                    // w's writer failed (fail)
	evBootAck                        // a boot-ack frame
	evLog                            // a log frame (frame)
	evCall                           // a call frame (frame)
	evCallSent                       // the outbox is about to send c: ok says whether to
	evCallCancel                     // the client's cancel for c (cancel) arrived
	evAnswered                       // the client answered c: ok says whether to reply
	evStray                          // data read from stray descriptor fd
	evEOF                            // descriptor fd reached end of stream
	evReaped                         // the child was reaped
	evQuiescent                      // the process group is empty (or given up on)
	evOutput                         // an output frame (frame)
)

// event is one input to the machine; the fields its kind names are set.
type event struct {
	kind    eventKind
	w       *worker
	wr      *fdWriter
	d       decision
	fd      int
	data    []byte
	frame   wireguard.Frame
	refusal string // evCall: the arguments' TypeError message, checked by the reader
	c       *call
	cancel  func()
	fail    *writeFailure
	softCPU int64
	cpuBase time.Duration // evAttach in a session: the child's CPU time so far
	eof     [3]bool       // evAttach in a session: descriptors already at end of stream
}

// effects are the side effects of one step, performed after unlocking
// (Run.perform), plus the answers of the query events.
type effects struct {
	kill         *worker          // SIGTERM w's group now and release its writer
	sigkill      *worker          // the grace passed: SIGKILL w's group
	removeEarly  *worker          // every descriptor ended before the reap: start removing the directory
	restart      *worker          // w was lost before boot: retire it and start on a fresh child
	settle       bool             // settled: clean up w (settleW) and open staged
	settleW      *worker          // the settled run's child, nil if it never had one or its session keeps it
	kept         *worker          // a session run settled leaving its child to the session
	res          *protocol.Result // settle: the queued result (its session stats are filled before staged opens)
	staged       chan struct{}    // the gate of the queued result
	flush        bool             // the outbox holds deliveries to make from a new goroutine
	unknown      *call            // reply "unknown binding" to this call
	refused      *call            // reply TypeError (c.refusal) to this call: its arguments were refused
	wr           *fdWriter        // evAnswered, unknown, refused: the writer to reply through
	ok           bool             // evCallSent, evAnswered: go on; evCallCancel: cancel now
	decided      bool             // the run was decided by this step (for the log)
	sinceHandoff time.Duration    // for the decided / settled log lines
}

// machine is the run's settlement state machine. Every change of its state
// goes through step, under the run's lock. step does no I/O: it queues into
// the outbox and the child's writer (memory only, under their own locks),
// arms and stops timers, and returns what must be done after unlocking. Its
// timers (wall clock, grace kill, close deadline) post their events back
// through post.
type machine struct {
	// configuration, fixed at creation
	sess        *Session // the persistent session the run executes in; nil for a fresh run
	lifetimeCPU int64    // a session run's: the session's lifetime CPU seconds (CODERUN_SESSION_CPU_SECONDS)
	lim         protocol.Limits
	known       map[string]map[string]protocol.Checker // declared bindings: global → name → checks (nil: untyped)
	program     string
	installMs   *int64 // the run's packages' install time (stats.installMs); set before the child
	grace       time.Duration
	graceKill   bool                    // SIGKILL the group after the grace (off only for C129)
	post        func(event)             // feeds timer events back (locks, steps, performs)
	onEvent     func(protocol.LogEvent) // the capture's stream callback (nil unless streaming)

	// the run/output stream callback (nil unless streaming)
	onOutput func(protocol.OutputEvent)

	// helpers with their own synchronisation
	out *outbox   // the client deliveries, for the run's life
	wr  *fdWriter // the attached child's fd-3 writer (nil without a child)

	// state
	state     state
	starting  bool // a goroutine is getting a child: it settles (or kills) the run itself
	restarted bool // moved once to a fresh child (lostBeforeBoot)
	accepted  time.Time
	dequeued  time.Time
	handoff   time.Time // the wall clock's start
	w         *worker
	softCPU   int64         // the soft RLIMIT_CPU in force when the child was attached (docs/child-protocol-daemon.md §4.8)
	cpuBase   time.Duration // a session child's CPU time when the run started (0 for a fresh child)
	dec       decision
	reaped    bool
	abandoned bool // close deadline passed: pipes abandoned
	eof       [3]bool
	// tailAdmitted marks the stray pipes whose final residual reached the
	// ledger (admitted only after fd 3 ended, see admitStrayTails).
	tailAdmitted [3]bool
	capture      *wireguard.Capture

	outs *outputs // displayed objects and the outputs budget (outputs.go)

	wallTimer, killTimer, closeTimer *time.Timer

	// fd-3 protocol state
	bootAcked    bool
	nextID       int64
	calls        map[int64]*call
	inflight     int
	bindingCalls int64
}

func (m *machine) init(now time.Time) {
	m.accepted = now
	m.calls = make(map[int64]*call)
	m.capture = wireguard.NewCapture(m.lim.MaxLogBytes, m.onEvent)
	m.outs = newOutputs(m.lim.MaxOutputBytes)
}

func (m *machine) decided() bool { return m.state >= stateDecided }
func (m *machine) settled() bool { return m.state >= stateSettled }

// step applies one event and returns the effects to perform after unlocking.
func (m *machine) step(ev event) effects {
	var eff effects
	switch ev.kind {
	case evDequeue:
		m.state, m.starting, m.dequeued = stateStarting, true, time.Now()
	case evAttach:
		m.attach(ev, &eff)
	case evStartFailed:
		m.starting = false
		m.decide(decision{err: ev.d.err}, &eff)
		m.settle(&eff)
	case evDecide:
		m.decide(ev.d, &eff)
	case evWall:
		m.decide(decision{err: wallTimeout(m.lim.MaxWallMs)}, &eff)
	case evGraceKill:
		eff.sigkill = ev.w
	case evCloseDeadline:
		m.closeDeadline(ev.w, &eff)
	case evBootWritten:
		if m.w == ev.w && m.state == stateLive && ev.w.warm {
			m.armWall() // warm: the wall clock starts at the boot write
		}
	case evWriteFailed:
		if ev.fail.handshake && !ev.fail.stopped {
			what := "failed to boot python subprocess: "
			if m.sess != nil {
				what = "failed to send the run to the session's python process: "
			}
			m.decide(decision{err: workerExit(what + ev.fail.err.Error()), lost: true}, &eff)
		}
	case evBootAck:
		m.bootAck()
	case evLog:
		if !m.decided() {
			m.capture.Log(ev.frame.Text, ev.frame.Open, ev.frame.Truncated)
		}
	case evCall:
		m.acceptCall(&ev.frame, ev.refusal, &eff)
	case evOutput:
		m.output(&ev.frame)
	case evCallSent:
		if eff.ok = !m.decided(); eff.ok {
			m.bindingCalls++
		}
	case evCallCancel:
		m.callCancel(ev.c, ev.cancel, &eff)
	case evAnswered:
		m.answered(ev.c, &eff)
	case evStray:
		if !m.settled() && !m.abandoned {
			m.capture.Stray(ev.fd, ev.data)
		}
	case evEOF:
		m.eof[ev.fd] = true
		m.admitStrayTails()
		m.checkClose(&eff)
	case evReaped:
		m.reaped = true
		m.checkClose(&eff)
	case evQuiescent:
		m.state = stateQuiescent
		stopTimer(m.killTimer)
	}
	return eff
}

// attach makes w the run's child: cold, the wall clock starts now (docs/child-protocol-daemon.md §4.3 step
// 5); decided while starting (cancel, shutdown), the kill starts now.
func (m *machine) attach(ev event, eff *effects) {
	w, wr := ev.w, ev.wr
	m.starting = false
	m.w, m.wr, m.softCPU = w, wr, ev.softCPU
	m.handoff = time.Now()
	if m.sess != nil { // an idle session child: no boot, the run frame follows
		m.cpuBase, m.eof, m.bootAcked = ev.cpuBase, ev.eof, true
	}
	switch {
	case m.decided():
		wr.stop()
		m.kill(eff)
	case !w.warm:
		m.state = stateLive
		m.armWall()
	default:
		m.state = stateLive
	}
}

// armWall starts the wall clock: at spawn for a cold child, at the boot write
// for a warm one (docs/child-protocol-daemon.md §4.3 step 5).
func (m *machine) armWall() {
	m.handoff = time.Now()
	m.wallTimer = time.AfterFunc(time.Duration(m.lim.MaxWallMs)*time.Millisecond,
		func() { m.post(event{kind: evWall}) })
}

// decide: the first decision wins (docs/child-protocol-daemon.md §4.6).
func (m *machine) decide(d decision, eff *effects) {
	if m.decided() {
		return
	}
	m.state, m.dec = stateDecided, d
	eff.decided, eff.sinceHandoff = true, time.Since(m.handoff)
	stopTimer(m.wallTimer)
	m.capture.CloseHold()
	var cancels []func()
	for _, c := range m.calls {
		if c.cancel != nil {
			cancels = append(cancels, c.cancel)
		}
	}
	m.calls = make(map[int64]*call)
	m.inflight = 0
	if m.wr != nil {
		m.wr.stop()
	}
	if len(cancels) > 0 {
		m.out.push(outItem{cancels: cancels})
	}
	eff.flush = m.out.pending()
	switch {
	case m.w != nil && m.sess != nil && d.keepsSession():
		m.capture.FlushStray() // a native write's unterminated tail belongs to this run
		m.settle(eff)          // the child stays alive, idle, with its session
	case m.w != nil:
		m.kill(eff)
	case m.starting:
		// the starting goroutine kills the child it gets, or settles
	default:
		m.settle(eff)
	}
}

// kill starts the kill escalation: SIGTERM now (the effect), SIGKILL after
// the grace, and the close deadline at grace + 2000 ms.
func (m *machine) kill(eff *effects) {
	w := m.w
	if m.graceKill {
		m.killTimer = time.AfterFunc(m.grace, func() { m.post(event{kind: evGraceKill, w: w}) })
	}
	m.closeTimer = time.AfterFunc(m.grace+protocol.CloseMargin, func() { m.post(event{kind: evCloseDeadline, w: w}) })
	eff.kill = w
}

// closeDeadline: flush stray residuals, abandon the pipes, settle — unless
// the run has moved on from w (restart).
func (m *machine) closeDeadline(w *worker, eff *effects) {
	if m.settled() || m.w != w {
		return
	}
	m.capture.FlushStray()
	m.abandoned = true
	m.settle(eff)
}

// admitStrayTails admits the newline-free tail of each stray pipe that has
// ended, but only once fd 3 has ended too: every frame the child wrote before
// exiting (a truncation marker above all) is then already processed, so a
// tail written after it cannot slip in ahead of it (C152).
func (m *machine) admitStrayTails() {
	if !m.eof[fdConn] || m.settled() || m.abandoned {
		return
	}
	for _, fd := range []int{fdStdout, fdStderr} {
		if m.eof[fd] && !m.tailAdmitted[fd] {
			m.tailAdmitted[fd] = true
			m.capture.StrayEOF(fd)
		}
	}
}

// checkClose: close = reaped and fd 3, stdout, stderr at EOF. The three EOFs
// before the reap start removing the run directory early.
func (m *machine) checkClose(eff *effects) {
	if m.settled() || m.w == nil || !m.eof[fdConn] || !m.eof[fdStdout] || !m.eof[fdStderr] {
		return
	}
	if !m.reaped {
		eff.removeEarly = m.w
		return
	}
	if m.lostBeforeBoot() {
		m.restart(eff)
		return
	}
	m.decide(decision{err: m.classify()}, eff)
	m.settle(eff)
}

// classify decides a close without a prior decision (docs/child-protocol-daemon.md §4.8).
func (m *machine) classify() *protocol.RunError {
	w := m.w
	if w.waitErr != nil {
		return workerExit("failed to wait for python subprocess: " + w.waitErr.Error())
	}
	e := w.exit
	if !e.Signaled {
		return exitedEarly(e.Code, e.Signal, e.Signaled)
	}
	lifetime := m.lifetimeCPU
	switch {
	case e.Signal == "SIGKILL" && cpuAtLeast(e.CPU-m.cpuBase, m.softCPU):
		return cpuTimeout(m.lim.CPUSeconds)
	case lifetime > 0 && (e.CPUBound || e.Signal == "SIGXCPU" && cpuAtLeast(e.CPU+lifetimeSlack, lifetime)):
		// The session's total: over its family in tier sandbox (the init's
		// bound), else the child's own, its soft RLIMIT_CPU never being
		// above the lifetime (docs/child-protocol-sessions.md §6.2).
		return lifetimeTimeout(lifetime)
	case e.Signal == "SIGXCPU":
		return cpuTimeout(m.lim.CPUSeconds)
	}
	return exitedEarly(e.Code, e.Signal, e.Signaled)
}

// lifetimeSlack: a child's rusage at its SIGXCPU can fall short of the
// soft limit that fired (measured: 2.89 s at a 3 s limit), and the child
// rounds its CPU so far up to whole seconds when it moves the limit.
const lifetimeSlack = time.Second

// cpuAtLeast reports cpu >= soft seconds without overflowing a Duration.
func cpuAtLeast(cpu time.Duration, soft int64) bool {
	return cpu.Nanoseconds()/int64(time.Second) >= soft
}

// lostBeforeBoot: the run's warm child has ended before acknowledging boot,
// undecided or with only its boot write failed, leaving nothing in the ledger
// and making no call. No program code has run (the run frame follows
// boot-ack): the child was lost while waiting in the pool or just after (its
// fork server died, say), so the run moves to a fresh child, once.
func (m *machine) lostBeforeBoot() bool {
	return m.w.warm && !m.restarted && !m.bootAcked && (!m.decided() || m.dec.lost) &&
		m.bindingCalls == 0 && len(m.capture.Entries()) == 0
}

// restart takes the run back to starting: a decision from now on (cancel,
// shutdown) is the restart's to settle, as for any starting run. The lost
// child's writer is told to stop; the effect retires the child and starts the
// run again. The lost child's readers and reaper are done (close came).
func (m *machine) restart(eff *effects) {
	eff.restart = m.w
	m.wr.stop()
	m.restarted = true
	stopTimer(m.wallTimer)
	stopTimer(m.killTimer)
	stopTimer(m.closeTimer)
	m.wallTimer, m.killTimer, m.closeTimer = nil, nil, nil
	m.w, m.wr, m.state, m.starting = nil, nil, stateStarting, true
	m.dec = decision{}
	m.reaped, m.eof, m.tailAdmitted = false, [3]bool{}, [3]bool{}
	m.capture = wireguard.NewCapture(m.lim.MaxLogBytes, m.onEvent)
}

// settle: once; assemble the result and queue it behind every earlier client
// delivery, gated on the run directory's removal (the effect).
func (m *machine) settle(eff *effects) {
	if m.settled() {
		return
	}
	m.state = stateSettled
	stopTimer(m.closeTimer)
	res := protocol.Result{Logs: m.capture.Entries(), Error: m.dec.err}
	if res.Logs == nil {
		res.Logs = []string{}
	}
	if m.dec.err == nil && m.dec.hasValue {
		res.Value = m.dec.value
	}
	res.Stats = m.stats(time.Now())
	res.Outputs = m.outs.list
	eff.settle, eff.settleW, eff.staged, eff.res = true, m.w, make(chan struct{}), &res
	if m.sess != nil {
		kept := m.w != nil && !m.reaped && m.dec.keepsSession()
		if kept {
			eff.settleW, eff.kept = nil, m.w
		}
		info := m.sess.account(m.w != nil, kept, m.dec.err)
		res.Session = &info
	}
	eff.sinceHandoff = time.Since(m.handoff)
	m.out.push(outItem{result: &res, staged: eff.staged})
}

func (m *machine) stats(now time.Time) protocol.Stats {
	s := protocol.Stats{BindingCalls: m.bindingCalls, LogBytes: m.capture.Charged(), InstallMs: m.installMs}
	if m.w != nil {
		s.QueueMs = m.dequeued.Sub(m.accepted).Milliseconds()
		s.WallMs = now.Sub(m.handoff).Milliseconds()
	} else { // never got a child
		s.QueueMs = now.Sub(m.accepted).Milliseconds()
	}
	if m.reaped && m.w.waitErr == nil {
		s.CPUMs = (m.w.exit.CPU - m.cpuBase).Milliseconds()
		s.MaxRssKb = m.w.exit.MaxRSSKb
	}
	return s
}

// bootAck queues the run frame on the first boot-ack (docs/child-protocol-wire.md §2.3 step 4).
func (m *machine) bootAck() {
	if m.decided() || m.bootAcked {
		return
	}
	m.bootAcked = true
	m.w.egressLn.serve() // the init's listener exists once the program runs
	m.wr.sendRun(runFrame(m.program))
}

// acceptCall: strict id sequence, dispatch, backlog cap (docs/child-protocol-wire.md §2.9). A call out of
// sequence is ignored; an unknown binding is answered by the daemon.
func (m *machine) acceptCall(f *wireguard.Frame, refusal string, eff *effects) {
	if m.decided() || f.ID != float64(m.nextID) {
		return
	}
	id := m.nextID
	m.nextID++
	check, known := m.known[f.Global][f.Name]
	c := &call{id: id, global: f.Global, name: f.Name, args: f.Args, check: check, refusal: refusal}
	switch {
	case !known:
		eff.unknown, eff.wr = c, m.wr
		return
	case refusal != "": // consumed its id; never sent, never counted
		eff.refused, eff.wr = c, m.wr
		return
	}
	if m.inflight >= protocol.CallBacklog {
		m.decide(decision{err: workerExit(protocol.MsgCallBacklog)}, eff)
		return
	}
	m.inflight++
	m.calls[id] = c
	m.out.push(outItem{call: c})
}

// callCancel keeps the client's cancel for c, or asks for it to be called
// now when the run was decided while the call was being sent.
func (m *machine) callCancel(c *call, cancel func(), eff *effects) {
	if c.answered || cancel == nil {
		return
	}
	if m.decided() {
		eff.ok = true
		return
	}
	c.cancel = cancel
}

// answered accepts the client's answer to c if the call is still open.
func (m *machine) answered(c *call, eff *effects) {
	if m.decided() || c.answered || m.calls[c.id] != c {
		return
	}
	c.answered = true
	delete(m.calls, c.id)
	m.inflight--
	eff.ok, eff.wr = true, m.wr
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}
