package session

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// The session-run variant of the machine (docs/protocol-sessions.md §11): a run in a
// persistent session attaches to a booted child, settles on the child's
// done without killing it when the outcome keeps the session, and goes the
// fresh run's way (kill, close, settle) when the outcome ends it.

// sessionFSM is an fsm whose run belongs to a bare session.
func sessionFSM(t *testing.T) (*fsm, *Session) {
	s := &Session{id: "session-1"}
	return newFSM(t, func(m *machine) { m.sess = s }), s
}

// attachedInSession attaches a booted session child that has used cpuBase.
func (f *fsm) attachedInSession(cpuBase time.Duration, eof [3]bool) (*worker, *fdWriter) {
	w, wr := &worker{}, newTestWriter()
	f.step(event{kind: evDequeue})
	f.mu.Lock() // the wall timer may step the machine from now on
	defer f.mu.Unlock()
	eff := f.m.step(event{kind: evAttach, w: w, wr: wr, softCPU: f.m.lim.CPUSeconds, cpuBase: cpuBase, eof: eof})
	if eff.kill != nil || eff.settle || f.m.state != stateLive || !f.m.bootAcked {
		f.t.Fatalf("attach in a session: effects %+v, state %v, acked %v", eff, f.m.state, f.m.bootAcked)
	}
	return w, wr
}

func TestMachineSessionC313RunKeepsChild(t *testing.T) {
	exc := &protocol.RunError{Kind: protocol.KindException, Message: "boom"}
	for _, d := range []decision{
		{value: []byte("1"), hasValue: true, done: true},
		{err: exc, done: true},
		{err: &protocol.RunError{Kind: protocol.KindInvalidOutput, Message: protocol.MsgNonLossless}, done: true},
		{err: &protocol.RunError{Kind: protocol.KindOutputLimit, Message: outputLimitMessage(8)}, done: true},
	} {
		synctest.Test(t, func(t *testing.T) {
			f, _ := sessionFSM(t)
			w, wr := f.attachedInSession(0, [3]bool{})
			eff := f.step(event{kind: evDecide, d: d})
			if !eff.settle || eff.kept != w || eff.settleW != nil || eff.kill != nil || !wr.isStopped() {
				t.Fatalf("done %+v: effects %+v, writer stopped %v", d.err, eff, wr.isStopped())
			}
			res := f.result()
			if s := res.Session; s == nil || !s.Alive || s.Runs != 1 || s.Reason != "" || s.ID != "session-1" {
				t.Fatalf("session member %+v", res.Session)
			}
			f.mu.Lock()
			if f.m.wallTimer.Stop() {
				t.Error("the wall timer still runs after a kept settlement")
			}
			f.mu.Unlock()
		})
	}
}

func TestMachineSessionC313RunEndsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _ := sessionFSM(t)
		w, _ := f.attachedInSession(0, [3]bool{fdStdout: true}) // the program closed fd 1 in an earlier run
		time.Sleep(time.Duration(f.m.lim.MaxWallMs) * time.Millisecond)
		synctest.Wait()
		if ts := f.timers(); len(ts) != 1 || ts[0].kind != evWall || ts[0].eff.kill != w {
			t.Fatalf("timers %+v, want the wall clock's kill", ts)
		}
		w.exit = child.Exit{Code: -1, Signal: "SIGTERM", Signaled: true}
		f.mu.Lock()
		for _, fd := range []int{fdConn, fdStderr} { // fd 1 ended before the run: carried at attach
			f.m.step(event{kind: evEOF, fd: fd})
		}
		eff := f.m.step(event{kind: evReaped})
		f.mu.Unlock()
		if !eff.settle || eff.settleW != w || eff.kept != nil {
			t.Fatalf("close: %+v", eff)
		}
		res := f.result()
		if s := res.Session; s == nil || s.Alive || s.Runs != 1 || s.Reason != wallTimeout(f.m.lim.MaxWallMs).Message {
			t.Fatalf("session member %+v", res.Session)
		}
		f.step(event{kind: evQuiescent})
	})
}

// A session run's CPU is counted from its own start: the rusage-proven
// classification subtracts the child's CPU before the run.
func TestMachineSessionC301CPUShare(t *testing.T) {
	for _, c := range []struct {
		used  time.Duration
		cpuTO bool
	}{{5*time.Second + 999*time.Millisecond, false}, {6 * time.Second, true}} {
		synctest.Test(t, func(t *testing.T) {
			f, _ := sessionFSM(t)
			f.m.lim.CPUSeconds = 1
			w, _ := f.attachedInSession(5*time.Second, [3]bool{})
			w.exit = child.Exit{Code: -1, Signal: "SIGKILL", Signaled: true, CPU: c.used}
			f.closeAll()
			res := f.result()
			if got := res.Error.Budget == protocol.BudgetCPU; got != c.cpuTO {
				t.Errorf("CPU %v after 5 s: error %+v, want cpu timeout %v", c.used, res.Error, c.cpuTO)
			}
			if res.Stats.CPUMs != (c.used - 5*time.Second).Milliseconds() {
				t.Errorf("cpuMs %d, want the run's share", res.Stats.CPUMs)
			}
			f.step(event{kind: evQuiescent})
		})
	}
}

// A session run ended at the session's lifetime CPU total is a cpu timeout
// naming the total: killed by the sandbox init's family bound (CPUBound),
// or by SIGXCPU at the total (the rusage may fall short of it by a tick or
// so); a SIGXCPU far below the total (a program that lowered its own soft
// limit) and a plain SIGKILL are not.
func TestMachineSessionC341Lifetime(t *testing.T) {
	for _, c := range []struct {
		exit child.Exit
		want string // "lifetime", "run" or "" (no timeout)
	}{
		{child.Exit{Code: -1, Signal: "SIGKILL", Signaled: true, CPU: 6 * time.Second, CPUBound: true}, "lifetime"},
		{child.Exit{Code: -1, Signal: "SIGXCPU", Signaled: true, CPU: 9890 * time.Millisecond}, "lifetime"},
		{child.Exit{Code: -1, Signal: "SIGXCPU", Signaled: true, CPU: 6 * time.Second}, "run"},
		{child.Exit{Code: -1, Signal: "SIGKILL", Signaled: true, CPU: 6 * time.Second}, ""},
	} {
		synctest.Test(t, func(t *testing.T) {
			f, _ := sessionFSM(t)
			f.m.lim.CPUSeconds, f.m.lifetimeCPU = 20, 10
			w, _ := f.attachedInSession(5*time.Second, [3]bool{})
			w.exit = c.exit
			f.closeAll()
			e, got := f.result().Error, ""
			switch {
			case e == nil || e.Budget != protocol.BudgetCPU:
			case e.Message == lifetimeTimeout(10).Message:
				got = "lifetime"
			default:
				got = "run"
			}
			if got != c.want {
				t.Errorf("exit %+v: error %+v, want %q", c.exit, e, c.want)
			}
			f.step(event{kind: evQuiescent})
		})
	}
}

// A session run cancelled in its session's queue settles without a child
// and leaves the session alive, its run count unchanged.
func TestMachineSessionC307QueuedCancel(t *testing.T) {
	f, s := sessionFSM(t)
	s.runs = 3
	eff := f.step(event{kind: evDecide, d: decision{err: abortError(protocol.MsgCancelled)}})
	if !eff.settle || eff.kept != nil || eff.settleW != nil {
		t.Fatalf("effects %+v", eff)
	}
	if si := f.result().Session; si == nil || !si.Alive || si.Runs != 3 {
		t.Fatalf("session member %+v", si)
	}
}
