package session

import (
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// The machine's tests drive step directly: no child, no I/O. The workers are
// bare values (their exit status set by hand) and the writer is never run;
// timers are real time.Timers run inside a synctest bubble, so their
// deadlines are checked to the nanosecond of fake time.

// testGrace is the grace the machine tests run with.
const testGrace = 100 * time.Millisecond

// fsm is a machine under test. Timer events are stepped under mu (like the
// run's dispatch) and their effects recorded in posted; the tests read the
// machine directly only while no timer has fired.
type fsm struct {
	t      *testing.T
	mu     sync.Mutex
	m      machine
	posted []posted
}

// posted is one timer event and what stepping it did.
type posted struct {
	at   time.Duration // fake time since the fsm was made
	kind eventKind
	eff  effects
}

func newFSM(t *testing.T, mod func(*machine)) *fsm {
	f := &fsm{t: t}
	start := time.Now()
	f.m = machine{
		lim:       testLimits(),
		known:     knownBindings(tools("known")),
		program:   "return 1",
		grace:     testGrace,
		graceKill: true,
		out:       newOutbox(nil),
		post: func(ev event) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.posted = append(f.posted, posted{at: time.Since(start), kind: ev.kind, eff: f.m.step(ev)})
		},
	}
	if mod != nil {
		mod(&f.m)
	}
	f.m.init(start)
	return f
}

func (f *fsm) step(ev event) effects {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.step(ev)
}

// timers returns the timer events posted so far.
func (f *fsm) timers() []posted {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]posted(nil), f.posted...)
}

// result pops the outbox up to the queued result, failing when there is none.
func (f *fsm) result() protocol.Result {
	f.t.Helper()
	for {
		it, ok := f.m.out.pop()
		if !ok {
			f.t.Fatal("no result queued")
		}
		if it.result != nil {
			return *it.result
		}
	}
}

// attached dequeues the machine and attaches a worker (cold unless warm).
func (f *fsm) attached(warm bool) (*worker, *fdWriter) {
	w, wr := &worker{warm: warm}, newTestWriter()
	f.step(event{kind: evDequeue})
	if eff := f.step(event{kind: evAttach, w: w, wr: wr, softCPU: 1}); eff.kill != nil || eff.settle {
		f.t.Fatalf("attach: unexpected effects %+v", eff)
	}
	return w, wr
}

// closeAll reports the three descriptors' end of stream and the reap.
func (f *fsm) closeAll() effects {
	for fd := range 3 {
		f.step(event{kind: evEOF, fd: fd})
	}
	return f.step(event{kind: evReaped})
}

func newTestWriter() *fdWriter {
	wr := &fdWriter{cap: protocol.ReplyQueue}
	wr.cond.L = &wr.mu
	return wr
}

func (wr *fdWriter) isStopped() bool {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return wr.stopped
}

func TestStateString(t *testing.T) {
	want := []string{"queued", "starting", "live", "decided", "settled", "quiescent"}
	for s, w := range want {
		if got := state(s).String(); got != w {
			t.Errorf("state(%d) = %q, want %q", s, got, w)
		}
	}
}

// A run decided in the queue settles at once, without a child (C-queue cancel).
func TestMachineQueuedCancelSettles(t *testing.T) {
	f := newFSM(t, nil)
	eff := f.step(event{kind: evStartFailed, d: decision{err: abortError(protocol.MsgCancelled)}})
	if !eff.settle || eff.settleW != nil || eff.kill != nil {
		t.Fatalf("effects %+v, want a settlement without a child", eff)
	}
	if s := f.m.state; s != stateSettled {
		t.Fatalf("state %v, want settled", s)
	}
	res := f.result()
	if res.Error == nil || res.Error.Message != protocol.MsgCancelled || res.Logs == nil || len(res.Logs) != 0 {
		t.Fatalf("result %+v", res)
	}
	if eff := f.step(event{kind: evDecide, d: decision{err: abortError(protocol.MsgShuttingDown)}}); eff.settle || eff.decided {
		t.Fatalf("a settled run stepped again: %+v", eff)
	}
}

// A run decided while starting is settled by its starting goroutine: with no
// child (evStartFailed) or, once it got one, through the kill.
func TestMachineDecidedWhileStarting(t *testing.T) {
	t.Run("no child", func(t *testing.T) {
		f := newFSM(t, nil)
		f.step(event{kind: evDequeue})
		eff := f.step(event{kind: evDecide, d: decision{err: abortError(protocol.MsgCancelled)}})
		if !eff.decided || eff.settle || eff.kill != nil {
			t.Fatalf("decide while starting: %+v", eff)
		}
		eff = f.step(event{kind: evStartFailed})
		if !eff.settle {
			t.Fatalf("start failure after the decision: %+v", eff)
		}
		if res := f.result(); res.Error.Message != protocol.MsgCancelled {
			t.Fatalf("result %+v, want the first decision", res.Error)
		}
	})
	t.Run("child", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFSM(t, nil)
			f.step(event{kind: evDequeue})
			f.step(event{kind: evDecide, d: decision{err: abortError(protocol.MsgCancelled)}})
			w, wr := &worker{}, newTestWriter()
			eff := f.step(event{kind: evAttach, w: w, wr: wr})
			if eff.kill != w || !wr.isStopped() || f.m.state != stateDecided {
				t.Fatalf("attach after the decision: kill %v, writer stopped %v, state %v", eff.kill, wr.isStopped(), f.m.state)
			}
			f.step(event{kind: evQuiescent}) // stop the grace kill; the close deadline is settled
		})
	})
}

// The first decision wins; deciding stops the writer, cancels the open
// calls (one outbox item) and starts the kill.
func TestMachineDecide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFSM(t, nil)
		w, wr := f.attached(false)
		f.step(event{kind: evCall, frame: wireguard.Frame{Type: protocol.FrameCall, ID: 0, Global: "tools", Name: "known"}})
		var c *call
		if it, ok := f.m.out.pop(); !ok || it.call == nil {
			t.Fatalf("the call was not queued: %+v", it)
		} else {
			c = it.call
		}
		cancelled := 0
		f.step(event{kind: evCallCancel, c: c, cancel: func() { cancelled++ }})
		eff := f.step(event{kind: evDecide, d: decision{value: []byte("1"), hasValue: true}})
		if !eff.decided || eff.kill != w || !eff.flush || !wr.isStopped() {
			t.Fatalf("decide: %+v (writer stopped %v)", eff, wr.isStopped())
		}
		if it, ok := f.m.out.pop(); !ok || len(it.cancels) != 1 {
			t.Fatalf("outbox after decide: %+v", it)
		} else {
			it.cancels[0]()
		}
		if cancelled != 1 {
			t.Errorf("cancels run %d times", cancelled)
		}
		if eff := f.step(event{kind: evDecide, d: decision{err: abortError("late")}}); eff.decided || eff.kill != nil {
			t.Errorf("second decision: %+v", eff)
		}
		if eff := f.step(event{kind: evAnswered, c: c}); eff.ok {
			t.Error("an answer after the decision was accepted")
		}
		if eff := f.closeAll(); !eff.settle || eff.settleW != w {
			t.Fatalf("close: %+v", eff)
		}
		if res := f.result(); string(res.Value) != "1" || res.Error != nil {
			t.Fatalf("result %+v, want the first decision's value", res)
		}
		f.step(event{kind: evQuiescent})
	})
}

// Close without a decision classifies the exit (docs/child-protocol-daemon.md §4.8).
func TestMachineClassify(t *testing.T) {
	cases := []struct {
		name  string
		exit  child.Exit
		wait  error
		kind  string
		msg   string
		sig   string
		code  *int
		cpuTO bool
	}{
		{name: "exit 7", exit: child.Exit{Code: 7}, msg: "python exited (code=7, signal=null) before completing", code: intp(7)},
		{name: "SIGSEGV", exit: child.Exit{Code: -1, Signal: "SIGSEGV", Signaled: true},
			msg: "python exited (code=null, signal=SIGSEGV) before completing", sig: "SIGSEGV"},
		{name: "SIGKILL under the soft limit", exit: child.Exit{Code: -1, Signal: "SIGKILL", Signaled: true, CPU: 999 * time.Millisecond},
			msg: "python exited (code=null, signal=SIGKILL) before completing", sig: "SIGKILL"},
		{name: "SIGKILL at the soft limit", exit: child.Exit{Code: -1, Signal: "SIGKILL", Signaled: true, CPU: time.Second}, cpuTO: true},
		{name: "SIGXCPU", exit: child.Exit{Code: -1, Signal: "SIGXCPU", Signaled: true}, cpuTO: true},
		{name: "wait error", wait: errors.New("boom"), msg: "failed to wait for python subprocess: boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFSM(t, nil)
				w, _ := f.attached(false)
				f.step(event{kind: evBootAck})
				w.exit, w.waitErr = c.exit, c.wait
				if eff := f.closeAll(); !eff.decided || !eff.settle {
					t.Fatalf("close: %+v", eff)
				}
				e := f.result().Error
				if c.cpuTO {
					if *e != *cpuTimeout(f.m.lim.CPUSeconds) {
						t.Fatalf("error %+v, want the CPU timeout", e)
					}
					return
				}
				if e.Kind != protocol.KindWorkerExit || e.Message != c.msg || e.Signal != c.sig ||
					(c.code == nil) != (e.ExitCode == nil) || c.code != nil && *c.code != *e.ExitCode {
					t.Fatalf("error %+v", e)
				}
			})
		})
	}
}

// The three ends of stream before the reap start the early directory
// removal; the reap then closes. A stray tail is admitted only once fd 3 has
// ended too (C152).
func TestMachineCloseOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFSM(t, nil)
		w, _ := f.attached(false)
		f.step(event{kind: evBootAck})
		f.step(event{kind: evStray, fd: fdStdout, data: []byte("tail")})
		f.step(event{kind: evEOF, fd: fdStdout})
		if len(f.m.capture.Entries()) != 0 {
			t.Fatal("the stray tail was admitted before fd 3 ended")
		}
		f.step(event{kind: evEOF, fd: fdStderr})
		if eff := f.step(event{kind: evEOF, fd: fdConn}); eff.removeEarly != w || eff.settle {
			t.Fatalf("last EOF before the reap: %+v", eff)
		}
		w.exit = child.Exit{Code: 3}
		if eff := f.step(event{kind: evReaped}); !eff.settle {
			t.Fatalf("reap after the EOFs: %+v", eff)
		}
		if res := f.result(); len(res.Logs) != 1 || res.Logs[0] != "tail" {
			t.Fatalf("logs %q", res.Logs)
		}
	})
}

// Binding calls: the id sequence is strict, an undeclared binding is
// answered by the daemon, an answer is accepted once, and the backlog cap
// decides the run (docs/child-protocol-wire.md §2.9).
func TestMachineCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFSM(t, nil)
		_, wr := f.attached(false)
		callFrame := func(id float64, name string) event {
			return event{kind: evCall, frame: wireguard.Frame{Type: protocol.FrameCall, ID: id, Global: "tools", Name: name}}
		}
		if eff := f.step(callFrame(1, "known")); eff != (effects{}) || f.m.out.pending() {
			t.Fatalf("out-of-sequence call: %+v", eff)
		}
		if eff := f.step(callFrame(0, "nope")); eff.unknown == nil || eff.unknown.id != 0 || eff.wr != wr || f.m.out.pending() {
			t.Fatalf("unknown binding: %+v", eff)
		}
		f.step(callFrame(1, "known"))
		it, _ := f.m.out.pop()
		if eff := f.step(event{kind: evCallSent, c: it.call}); !eff.ok {
			t.Fatal("a live call was not sent")
		}
		if eff := f.step(event{kind: evAnswered, c: it.call}); !eff.ok || eff.wr != wr {
			t.Fatalf("answer: %+v", eff)
		}
		if eff := f.step(event{kind: evAnswered, c: it.call}); eff.ok {
			t.Fatal("a second answer was accepted")
		}
		for id := range protocol.CallBacklog {
			f.step(callFrame(float64(2+id), "known"))
		}
		if f.m.decided() {
			t.Fatalf("decided at %d open calls", protocol.CallBacklog)
		}
		if eff := f.step(callFrame(2+protocol.CallBacklog, "known")); !eff.decided {
			t.Fatalf("call past the backlog: %+v", eff)
		}
		if f.m.dec.err.Message != protocol.MsgCallBacklog || f.m.bindingCalls != 1 {
			t.Fatalf("decision %+v, binding calls %d", f.m.dec.err, f.m.bindingCalls)
		}
		f.step(event{kind: evQuiescent})
	})
}

// A cancel that arrives for a call sent after the decision is called at once.
func TestMachineCallCancelAfterDecision(t *testing.T) {
	f := newFSM(t, nil)
	c := &call{}
	if eff := f.step(event{kind: evCallCancel, c: c, cancel: func() {}}); eff.ok || c.cancel == nil {
		t.Fatalf("live: %+v (kept %v)", eff, c.cancel != nil)
	}
	f.step(event{kind: evDecide, d: decision{err: abortError("x")}})
	if eff := f.step(event{kind: evCallCancel, c: &call{}, cancel: func() {}}); !eff.ok {
		t.Fatal("a cancel after the decision was not asked for at once")
	}
	if eff := f.step(event{kind: evCallCancel, c: &call{answered: true}, cancel: func() {}}); eff.ok {
		t.Fatal("an answered call was cancelled")
	}
}

// The first boot-ack queues the run frame; later ones do nothing.
func TestMachineBootAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFSM(t, nil)
		_, wr := f.attached(true)
		f.step(event{kind: evBootAck})
		if string(wr.run) != string(runFrame("return 1")) {
			t.Fatalf("run frame %q", wr.run)
		}
		wr.run = nil
		f.step(event{kind: evBootAck})
		if wr.run != nil {
			t.Fatal("a second boot-ack queued the run frame again")
		}
		f.step(event{kind: evQuiescent})
	})
}

// A warm child lost before boot-ack, with nothing logged and no call, moves
// the run to a fresh child once; the second loss is classified.
func TestMachineLostBeforeBoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFSM(t, nil)
		w, wr := f.attached(true)
		f.step(event{kind: evBootWritten, w: w})
		f.step(event{kind: evWriteFailed, w: w, fail: &writeFailure{err: errors.New("EPIPE"), handshake: true}})
		if !f.m.dec.lost {
			t.Fatal("a failed boot write did not decide a loss")
		}
		w.exit = child.Exit{Code: 1}
		eff := f.closeAll()
		if eff.restart != w || eff.settle || f.m.state != stateStarting || !wr.isStopped() {
			t.Fatalf("first loss: %+v, state %v", eff, f.m.state)
		}
		time.Sleep(time.Hour) // the lost child's timers were stopped
		if p := f.timers(); len(p) != 0 {
			t.Fatalf("timers of the lost child fired: %+v", p)
		}
		w2 := &worker{warm: true}
		f.step(event{kind: evAttach, w: w2, wr: newTestWriter()})
		w2.exit = child.Exit{Code: 1}
		if eff := f.closeAll(); eff.restart != nil || !eff.settle {
			t.Fatalf("second loss: %+v", eff)
		}
		f.step(event{kind: evQuiescent})
	})
}

// ---- timers ---------------------------------------------------------------------

// kinds lists the kinds of the posted timer events with their fake times.
func kinds(p []posted) map[eventKind]time.Duration {
	out := make(map[eventKind]time.Duration, len(p))
	for _, x := range p {
		out[x.kind] = x.at
	}
	return out
}

// The wall clock of a cold child starts at attach: at MaxWallMs it decides
// the run (timeout, budget wall) and starts the kill; SIGKILL follows after
// the grace and the close deadline at grace + 2000 ms settles with the
// pipes abandoned (docs/child-protocol-daemon.md §4.6 timing envelope).
func TestMachineWallKillCloseDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFSM(t, nil)
		w, _ := f.attached(false)
		time.Sleep(time.Hour)
		p := f.timers()
		at := kinds(p)
		wall := time.Duration(f.m.lim.MaxWallMs) * time.Millisecond
		want := map[eventKind]time.Duration{evWall: wall, evGraceKill: wall + testGrace,
			evCloseDeadline: wall + testGrace + protocol.CloseMargin}
		if len(p) != len(want) {
			t.Fatalf("posted %+v", p)
		}
		for k, d := range want {
			if at[k] != d {
				t.Errorf("event %d at %v, want %v", k, at[k], d)
			}
		}
		for _, x := range p {
			switch x.kind {
			case evWall:
				if x.eff.kill != w {
					t.Errorf("wall: %+v", x.eff)
				}
			case evGraceKill:
				if x.eff.sigkill != w {
					t.Errorf("grace: %+v", x.eff)
				}
			case evCloseDeadline:
				if !x.eff.settle || !f.m.abandoned {
					t.Errorf("close deadline: %+v", x.eff)
				}
			}
		}
		if e := f.result().Error; *e != *wallTimeout(f.m.lim.MaxWallMs) {
			t.Errorf("error %+v", e)
		}
		f.step(event{kind: evQuiescent})
	})
}

// A warm child's wall clock starts at the boot write, not at attach.
func TestMachineWarmWallStartsAtBoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFSM(t, nil)
		w, _ := f.attached(true)
		time.Sleep(5 * time.Second)
		if p := f.timers(); len(p) != 0 {
			t.Fatalf("a warm child's wall clock ran before boot: %+v", p)
		}
		f.step(event{kind: evBootWritten, w: w})
		time.Sleep(time.Hour)
		if at := kinds(f.timers()); at[evWall] != 5*time.Second+time.Duration(f.m.lim.MaxWallMs)*time.Millisecond {
			t.Fatalf("wall fired at %v", at[evWall])
		}
		f.step(event{kind: evQuiescent})
	})
}

// A decision stops the wall clock; a close before the deadline stops the
// close deadline; quiescence stops the grace SIGKILL.
func TestMachineTimersStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFSM(t, nil)
		f.attached(false)
		time.Sleep(10 * time.Millisecond)
		f.step(event{kind: evBootAck})
		f.step(event{kind: evDecide, d: decision{hasValue: true, value: []byte("1")}})
		time.Sleep(testGrace / 2)
		f.closeAll()
		f.step(event{kind: evQuiescent})
		time.Sleep(time.Hour)
		if p := f.timers(); len(p) != 0 {
			t.Fatalf("stopped timers fired: %+v", p)
		}
	})
}

// With the grace SIGKILL suppressed (C129's hook) only the close deadline runs.
func TestMachineNoGraceKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFSM(t, func(m *machine) { m.graceKill = false })
		f.attached(false)
		f.step(event{kind: evDecide, d: decision{err: abortError(protocol.MsgCancelled)}})
		time.Sleep(time.Hour)
		p := f.timers()
		if len(p) != 1 || p[0].kind != evCloseDeadline || p[0].at != testGrace+protocol.CloseMargin {
			t.Fatalf("posted %+v", p)
		}
	})
}

// fakeGroup is a process group whose members leave at emptyAt (never when
// negative), or at the first SIGKILL when killable.
type fakeGroup struct {
	start    time.Time
	emptyAt  time.Duration
	killable bool
	killed   bool
	kills    []time.Duration // when SIGKILL was sent
}

func (g *fakeGroup) GroupEmpty() bool {
	return g.killed && g.killable || g.emptyAt >= 0 && time.Since(g.start) >= g.emptyAt
}

func (g *fakeGroup) SignalGroup(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		g.killed = true
		g.kills = append(g.kills, time.Since(g.start))
	}
}

// Quiescence polls the group every 50 ms; with members left at settle +
// grace + 2000 ms it SIGKILLs again (C129) and gives up 2000 ms later.
func TestAwaitEmpty(t *testing.T) {
	deadline := testGrace + protocol.CloseMargin
	cases := []struct {
		name     string
		emptyAt  time.Duration
		killable bool
		emptied  bool
		returnAt time.Duration
		kills    []time.Duration
	}{
		{name: "empty at once", emptied: true},
		{name: "empties while polled", emptyAt: 120 * time.Millisecond, emptied: true, returnAt: 150 * time.Millisecond},
		{name: "survivor killed at the deadline", emptyAt: -1, killable: true, emptied: true,
			returnAt: deadline + protocol.GroupPoll, kills: []time.Duration{deadline}},
		{name: "never empties", emptyAt: -1, emptied: false,
			returnAt: deadline + protocol.CloseMargin, kills: []time.Duration{deadline}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := &fakeGroup{start: time.Now(), emptyAt: c.emptyAt, killable: c.killable}
				emptied := awaitEmpty(g, testGrace)
				if at := time.Since(g.start); emptied != c.emptied || at != c.returnAt || !slices.Equal(g.kills, c.kills) {
					t.Fatalf("emptied %v at %v with SIGKILLs at %v; want %v at %v with %v",
						emptied, at, g.kills, c.emptied, c.returnAt, c.kills)
				}
			})
		})
	}
}
