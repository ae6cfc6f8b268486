package session

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// sessionRun submits program on session sid and waits for its result.
func sessionRun(t *testing.T, m *Manager, sid, program string) protocol.Result {
	t.Helper()
	return submitWait(t, m.Submit, sid, program)
}

// submitWait submits program on session sid through submit (Manager's or
// a Lane's) and waits for its result.
func submitWait(t *testing.T, submit func(string, protocol.RunParams, Client, func(protocol.Result)) (*Run, error),
	sid, program string) protocol.Result {
	t.Helper()
	ch := make(chan protocol.Result, 1)
	if _, err := submit(`"r"`, protocol.RunParams{Program: program, SessionID: sid}, newFake(nil),
		func(r protocol.Result) { ch <- r }); err != nil {
		t.Fatalf("Submit on %s: %v", sid, err)
	}
	return recv(t, ch)
}

// A session opened on a warm child that was lost while waiting (it exits on
// reading its boot frame) opens again on a fresh child; when that one fails
// too, the open fails with the boot's reason and the id is never issued.
func TestOpenSessionWarmChildLost(t *testing.T) {
	lostFirst := func(body string) string {
		marker := filepath.Join(t.TempDir(), "first")
		return fakePython(t, fmt.Sprintf("if mkdir %q 2>/dev/null; then\n%s\nfi\nexec %q \"$@\"", marker, body, realPython(t)))
	}
	open := func(t *testing.T, py string) (*Manager, string, error) {
		m := check(t, func(c *Config) { c.Python, c.StartMode, c.WarmPool, c.MaxSessions = py, StartSpawn, 1, 4 })
		poolUntil(t, m.warm, "had its child ready", func(p *warmPool) bool { return len(p.ready) == 1 })
		sid, err := m.OpenSession(protocol.SessionParams{}, nil)
		return m, sid, err
	}
	t.Run("once", func(t *testing.T) {
		m, sid, err := open(t, lostFirst("read -r line <&3\nexit 3"))
		if err != nil {
			t.Fatalf("OpenSession: %v", err)
		}
		if res := sessionRun(t, m, sid, "x = 1\nreturn x + 1"); string(res.Value) != "2" || !res.Session.Alive {
			t.Fatalf("run: %+v %+v", res.Error, res.Session)
		}
	})
	t.Run("twice", func(t *testing.T) {
		m, _, err := open(t, fakePython(t, "read -r line <&3\nexit 3"))
		if err == nil || !strings.Contains(err.Error(), "did not acknowledge its boot") {
			t.Fatalf("OpenSession: %v", err)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if se := m.sessionErrLocked(nil, "session-1"); se.State != StateUnknown || len(m.sessions) != 0 {
			t.Errorf("after a failed open: %+v, %d open", se, len(m.sessions))
		}
	})
}
