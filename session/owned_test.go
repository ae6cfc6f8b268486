package session

import (
	"errors"
	"strconv"
	"syscall"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// laneRun submits program on lane l's session sid and waits for its result.
func laneRun(t *testing.T, l *Lane, sid, program string) protocol.Result {
	t.Helper()
	return submitWait(t, l.Submit, sid, program)
}

// wantUnknown fails unless err is −32004's "unknown", with no reason.
func wantUnknown(t *testing.T, what string, err error) {
	t.Helper()
	var se *SessionError
	if !errors.As(err, &se) || se.Cap || se.State != StateUnknown || se.Reason != "" {
		t.Errorf("%s: %v, want the session unknown", what, err)
	}
}

// TestLaneSessionsIsolated: a lane names only its own sessions; another
// lane's id, open or closed, and the Manager's own are unknown to it, and
// the cap counts every owner's sessions.
func TestLaneSessionsIsolated(t *testing.T) {
	m := check(t, func(c *Config) { c.MaxSessions = 2 })
	a, b := m.NewLane(0, nil), m.NewLane(0, nil)
	sa, err := a.OpenSession(protocol.SessionParams{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := laneRun(t, a, sa, "x = 41\nreturn x + 1"); string(r.Value) != "42" {
		t.Fatalf("a's run: %s", describe(r))
	}
	_, err = b.Submit(`"b"`, protocol.RunParams{Program: "return x", SessionID: sa}, newFake(nil), func(protocol.Result) {})
	wantUnknown(t, "b runs on a's session", err)
	_, err = b.ForkSession(sa, nil)()
	wantUnknown(t, "b forks a's session", err)
	_, err = b.CloseSession(sa)
	wantUnknown(t, "b closes a's session", err)
	_, err = m.CloseSession(sa)
	wantUnknown(t, "the Manager's own closes a's session", err)

	if _, err := b.OpenSession(protocol.SessionParams{}, nil); err != nil {
		t.Fatalf("b opens the second session: %v", err)
	}
	var se *SessionError
	if _, err := a.OpenSession(protocol.SessionParams{}, nil); !errors.As(err, &se) || !se.Cap {
		t.Errorf("a third session across lanes: %v, want the cap", err)
	}
	if m.SessionCount() != 2 {
		t.Errorf("SessionCount %d, want 2", m.SessionCount())
	}
	wait, err := a.CloseSession(sa)
	if err != nil {
		t.Fatal(err)
	}
	wait()
	_, err = b.CloseSession(sa)
	wantUnknown(t, "b closes a's closed session", err)
	if _, err := a.CloseSession(sa); !errors.As(err, &se) || se.State != StateClosed {
		t.Errorf("a closes its closed session again: %v, want closed", err)
	}
}

// TestLaneCloseEndsItsSessions: closing a lane closes its sessions (the
// live run aborts, session/closed "shutdown" is sent, the child is gone
// when Close returns) and refuses new ones; another lane's session lives on.
func TestLaneCloseEndsItsSessions(t *testing.T) {
	m := check(t, func(c *Config) { c.MaxSessions = 4 })
	a, b := m.NewLane(0, nil), m.NewLane(0, nil)
	closed := make(chan string, 1)
	sa, err := a.OpenSession(protocol.SessionParams{}, func(id, reason, _ string) { closed <- id + " " + reason })
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.OpenSession(protocol.SessionParams{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(laneRun(t, a, sa, "import os\nreturn os.getpid()").Value))
	if err != nil {
		t.Fatal(err)
	}
	live := make(chan protocol.Result, 1)
	if _, err := a.Submit(`"long"`, protocol.RunParams{Program: "import time\ntime.sleep(30)", SessionID: sa},
		newFake(nil), func(r protocol.Result) { live <- r }); err != nil {
		t.Fatal(err)
	}
	a.Close(protocol.MsgShuttingDown)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the session's child %d after Close: kill 0 = %v, want ESRCH", pid, err)
	}
	if r := recv(t, live); r.Error == nil || r.Error.Kind != protocol.KindAbort || r.Error.Message != protocol.MsgShuttingDown {
		t.Errorf("the live run: %s, want abort %q", describe(r), protocol.MsgShuttingDown)
	}
	if got := recv(t, closed); got != sa+" "+ReasonShutdown {
		t.Errorf("session/closed: %q, want %q", got, sa+" "+ReasonShutdown)
	}
	if _, err := a.OpenSession(protocol.SessionParams{}, nil); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("OpenSession on a closed lane: %v, want ErrShuttingDown", err)
	}
	if r := laneRun(t, b, sb, "return 7"); string(r.Value) != "7" {
		t.Errorf("b's session after a closed: %s", describe(r))
	}
	if m.SessionCount() != 1 {
		t.Errorf("SessionCount %d, want 1", m.SessionCount())
	}
}
