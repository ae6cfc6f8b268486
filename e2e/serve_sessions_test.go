package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Persistent sessions over `serve` connections (docs/service.md §3): each
// connection owns the sessions it opens.

// open opens a session on the connection and returns its id.
func (p *peer) open() string {
	p.t.Helper()
	m := p.call("session/open", `{}`)
	var r struct{ SessionID string }
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil || r.SessionID == "" {
		p.t.Fatalf("session/open: %s", m.raw)
	}
	return r.SessionID
}

// srun runs program in session sid and returns the response.
func (p *peer) srun(sid, program string) *msg {
	p.t.Helper()
	return p.call("run", `{"program":`+strconv.Quote(program)+`,"sessionId":`+strconv.Quote(sid)+`}`)
}

// wantCode fails unless m is an error with code whose data, for −32004,
// has state.
func wantCode(t *testing.T, what string, m *msg, code int, state string) {
	t.Helper()
	if m.Error == nil || m.Error.Code != code {
		t.Errorf("%s: %s, want error %d", what, m.raw, code)
		return
	}
	var data struct{ State string }
	if code == -32004 && (json.Unmarshal(m.Error.Data, &data) != nil || data.State != state) {
		t.Errorf("%s: data %s, want state %q", what, m.Error.Data, state)
	}
}

// waitProcs waits until the daemon whose TMPDIR is tmp has n run and
// session processes (in either tier: runProcs counts a sandbox's init too).
func waitProcs(t *testing.T, tmp string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(runProcs(tmp)) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d run and session processes, want %d", len(runProcs(tmp)), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sessionEnv is a service's environment for counting its processes: its
// own TMPDIR, no warm children.
func sessionEnv(tmp string, more ...string) map[string]string {
	env := map[string]string{"TMPDIR": tmp, "CODERUN_WARM_POOL": "0"}
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	return env
}

// TestServeSessionsIsolated: a connection's sessions keep their state and
// are invisible to another connection: running on, forking or closing
// another's id, open or closed, is −32004 "unknown". initialize reports
// the cap, and /metrics the sessions open.
func TestServeSessionsIsolated(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_MAX_SESSIONS": "3"}, sockPath(t))
	a, b := s.dial("").initialize(), s.dial("")
	if m := b.call("initialize", `{}`); !strings.Contains(string(m.Result), `"sessions":{"max":3,`) {
		t.Errorf("initialize: %s, want sessions.max 3", m.Result)
	}
	sa := a.open()
	if m := a.srun(sa, "x = 41\nreturn x + 1"); !strings.Contains(string(m.Result), `"value":42`) {
		t.Fatalf("a's run: %s", m.raw)
	}
	wantCode(t, "b runs on a's session", b.srun(sa, "return x"), -32004, "unknown")
	wantCode(t, "b forks a's session", b.call("session/fork", `{"sessionId":`+strconv.Quote(sa)+`}`), -32004, "unknown")
	wantCode(t, "b closes a's session", b.call("session/close", `{"sessionId":`+strconv.Quote(sa)+`}`), -32004, "unknown")
	sb := b.open()
	if m := b.srun(sb, "return globals().get('x')"); !strings.Contains(string(m.Result), `"value":null`) {
		t.Errorf("b's own session sees a's state: %s", m.raw)
	}
	s.waitMetric("coderun_sessions", 2)
	if m := a.srun(sa, "return x"); !strings.Contains(string(m.Result), `"value":41`) {
		t.Errorf("a's session after b's requests: %s", m.raw)
	}
	if m := a.call("session/close", `{"sessionId":`+strconv.Quote(sa)+`}`); m.Error != nil {
		t.Fatalf("a closes its session: %s", m.raw)
	}
	wantCode(t, "b runs on a's closed session", b.srun(sa, "return 1"), -32004, "unknown")
	wantCode(t, "a runs on its closed session", a.srun(sa, "return 1"), -32004, "closed")
	s.waitMetric("coderun_sessions", 1)
}

// TestServeSessionsCapAcrossConnections: CODERUN_MAX_SESSIONS counts every
// connection's sessions; a closed connection's sessions free the cap.
func TestServeSessionsCapAcrossConnections(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_MAX_SESSIONS": "1"}, sockPath(t))
	a, b := s.dial("").initialize(), s.dial("").initialize()
	a.open()
	m := b.call("session/open", `{}`)
	wantCode(t, "b opens past the daemon's cap", m, -32003, "")
	if m.Error != nil && !strings.Contains(m.Error.Message, "CODERUN_MAX_SESSIONS") {
		t.Errorf("the cap's message %q does not name CODERUN_MAX_SESSIONS", m.Error.Message)
	}
	a.c.Close()
	s.waitMetric("coderun_sessions", 0)
	b.open()
}

// TestServeSessionsCloseWithConnection: a connection that goes away, with
// a session idle and another running, takes both children with it (the
// process count is back to the baseline); another connection's session
// lives on.
func TestServeSessionsCloseWithConnection(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	s := startService(t, sessionEnv(tmp, "CODERUN_MAX_SESSIONS", "4", "CODERUN_MAX_SESSIONS_PER_CONNECTION", "4"), sockPath(t))
	a, b := s.dial("").initialize(), s.dial("").initialize()
	other := b.open()
	base := len(runProcs(tmp))
	a.open()
	busy := a.open()
	if base == 0 || len(runProcs(tmp)) <= base {
		t.Fatalf("processes: %d with one session, %d with three", base, len(runProcs(tmp)))
	}
	if _, err := a.conn.Request("run", json.RawMessage(`{"program":"import time\ntime.sleep(60)","sessionId":`+strconv.Quote(busy)+`}`)); err != nil {
		t.Fatal(err)
	}
	s.waitMetric("coderun_runs_running", 1)
	a.c.Close()
	s.waitMetric("coderun_sessions", 1)
	waitProcs(t, tmp, base)
	s.waitMetric("coderun_connections", 1)
	if m := b.srun(other, "return 9"); !strings.Contains(string(m.Result), `"value":9`) {
		t.Errorf("the other connection's session: %s", m.raw)
	}
}

// TestServeSessionsDrain: SIGTERM lets a session's run under way finish,
// refuses new sessions, then closes the session (session/closed
// "shutdown") and its child before the daemon exits 0.
func TestServeSessionsDrain(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	s := startService(t, sessionEnv(tmp, "CODERUN_DRAIN_MS", "20000", "CODERUN_MAX_SESSIONS", "2"), sockPath(t))
	a := s.dial("").initialize()
	sid := a.open()
	id, _ := a.conn.Request("run", json.RawMessage(`{"program":"import time\ntime.sleep(1.5)\nreturn 5","sessionId":`+strconv.Quote(sid)+`}`))
	s.waitMetric("coderun_runs_running", 1)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.waitMetric("coderun_draining", 1)
	if m := a.call("session/open", `{}`); m.Error == nil || m.Error.Message != "server is shutting down" {
		t.Errorf("session/open while draining: %s, want refused", m.raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if m, err := a.conn.Wait(ctx, id); err != nil || !strings.Contains(string(m.Result), `"value":5`) {
		t.Errorf("the session's run under way: %v %+v", err, m)
	}
	if note := waitNote(t, a, "session/closed"); !strings.Contains(string(note.Params), `"reason":"shutdown"`) {
		t.Errorf("session/closed: %s, want reason shutdown", note.Params)
	}
	if code := s.exit(20 * time.Second); code != 0 {
		t.Errorf("exit %d, want 0; stderr:\n%s", code, s.stderr)
	}
	waitProcs(t, tmp, 0)
}

// waitNote waits for the peer's next notification of method.
func waitNote(t *testing.T, p *peer, method string) *msg {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-p.notes:
			if m.Method == method {
				return m
			}
		case <-timeout:
			t.Fatal(errors.New("no " + method + " notification"))
			return nil
		}
	}
}

// TestServeSessionsWriteStall: a client that stops reading while its
// session's runs print megabytes has its connection closed once a write
// stalls CODERUN_WRITE_STALL_MS, and the session with it.
func TestServeSessionsWriteStall(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	s := startService(t, sessionEnv(tmp, "CODERUN_WRITE_STALL_MS", "500", "CODERUN_MAX_LOG_BYTES", "1000000"), sockPath(t))
	c, err := net.Dial("unix", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g := newGate()
	defer g.resume() // the reader then sees the connection closed
	p := &peer{t: t, c: c, conn: newConn(c, 1).start(gatedReader{g: g, r: c})}
	sid := p.initialize().open()
	s.waitMetric("coderun_sessions", 1)
	g.pause() // from now on the client reads nothing
	for i := range 8 {
		if _, err := p.conn.Request("run", json.RawMessage(`{"program":"print('x'*999000)","sessionId":`+strconv.Quote(sid)+`}`)); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	s.waitMetric("coderun_connections", 0)
	s.waitMetric("coderun_sessions", 0)
	waitProcs(t, tmp, 0)
}

// TestServeSessionsC760PerConnection: session ids are opaque (128 random
// bits, not a daemon-wide counter another connection could read its
// neighbours' activity from), and one connection holds at most its share
// of CODERUN_MAX_SESSIONS (CODERUN_MAX_SESSIONS_PER_CONNECTION, by default
// a quarter): a greedy connection is refused −32003 naming that cap while
// another still opens.
func TestServeSessionsC760PerConnection(t *testing.T) {
	t.Parallel()
	s := startService(t, sessionEnv(t.TempDir(), "CODERUN_MAX_SESSIONS", "8"), sockPath(t))
	a, b := s.dial("").initialize(), s.dial("").initialize()
	ids := map[string]bool{a.open(): true, a.open(): true}
	m := a.call("session/open", `{}`)
	wantCode(t, "a opens past its share", m, -32003, "")
	if m.Error != nil && !strings.Contains(m.Error.Message, "CODERUN_MAX_SESSIONS_PER_CONNECTION=2") {
		t.Errorf("the share's message %q does not name CODERUN_MAX_SESSIONS_PER_CONNECTION=2", m.Error.Message)
	}
	ids[b.open()] = true
	opaque := regexp.MustCompile(`^session-[A-Z2-7]{26}$`)
	for id := range ids {
		if !opaque.MatchString(id) {
			t.Errorf("session id %q is not opaque (want session- and 26 base32 characters)", id)
		}
	}
	if len(ids) != 3 {
		t.Errorf("session ids %v are not distinct", ids)
	}
}
