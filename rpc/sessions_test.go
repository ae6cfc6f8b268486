package rpc

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// session/open's params: run's limits rules, idleTimeoutMs positive and at
// most the configured idle time (docs/protocol-sessions.md §11.1).
func TestValidateSessionOpen(t *testing.T) {
	for _, c := range []struct{ params, msg string }{
		{`[]`, "params must be an object"},
		{`{"idleTimeoutMs":"5"}`, `idleTimeoutMs must be a positive integer, got "5"`},
		{`{"idleTimeoutMs":-1}`, "idleTimeoutMs must be a positive integer, got -1"},
		{`{"idleTimeoutMs":1e3}`, "idleTimeoutMs must be a positive integer, got 1e3"},
		{`{"idleTimeoutMs":1001}`, "idleTimeoutMs must not exceed the daemon's configured 1000, got 1001"},
		{`{"limits":{"maxWallMs":0}}`, "limits.maxWallMs must be a positive integer, got 0"},
	} {
		if _, err := wire.ValidateSessionOpen([]byte(c.params), cfgLimits, 1000, noPackages, nil); err == nil || err.Error() != c.msg {
			t.Errorf("%s: %v, want %q", c.params, err, c.msg)
		}
	}
	p, err := wire.ValidateSessionOpen([]byte(`{"limits":{"addressSpaceMb":256},"idleTimeoutMs":1000}`), cfgLimits, 1000, noPackages, nil)
	if err != nil || p.Limits.AddressSpaceMb != 256 || p.IdleTimeoutMs != 1000 {
		t.Errorf("valid params: %+v %v", p, err)
	}
	if p, err := wire.ValidateSessionOpen(nil, cfgLimits, 1000, noPackages, nil); err != nil || !reflect.DeepEqual(p, protocol.SessionParams{}) {
		t.Errorf("absent params: %+v %v", p, err)
	}
}

// A run's sessionId: a non-empty string; the session fixes addressSpaceMb.
func TestValidateRunSessionID(t *testing.T) {
	for _, c := range []struct{ params, msg string }{
		{`{"program":"","sessionId":1}`, "sessionId must be a string"},
		{`{"program":"","sessionId":""}`, "sessionId must be a non-empty string"},
		{`{"program":"","sessionId":"s","limits":{"addressSpaceMb":256}}`, "limits.addressSpaceMb is fixed for the session's lifetime"},
	} {
		if _, err := wire.ValidateRun([]byte(c.params), cfgLimits, noPackages); err == nil || err.Error() != c.msg {
			t.Errorf("%s: %v, want %q", c.params, err, c.msg)
		}
	}
	for params, want := range map[string]string{`{"program":"","sessionId":null}`: "", `{"program":"","sessionId":"s-1"}`: "s-1"} {
		if p, err := wire.ValidateRun([]byte(params), cfgLimits, noPackages); err != nil || p.SessionID != want {
			t.Errorf("%s: %q %v", params, p.SessionID, err)
		}
	}
}

// The session member of a run result, session/closed and −32004's data.
func TestEncodeSessions(t *testing.T) {
	var b strings.Builder
	emitRunResponse("7", protocol.Result{Logs: []string{}, Session: &protocol.SessionInfo{ID: "s", Runs: 2, Reason: "gone"}},
		func(p []byte) { b.Write(p) })
	if got := b.String(); !strings.HasSuffix(got, `"logBytes":0},"session":{"id":"s","alive":false,"runs":2,"reason":"gone"}}}`) {
		t.Errorf("run response %s", got)
	}
	if got := string(encodeSessionClosed("s", "idle", "m")); got != `{"jsonrpc":"2.0","method":"session/closed","params":{"sessionId":"s","reason":"idle","message":"m"}}` {
		t.Errorf("session/closed %s", got)
	}
	data := sessionErrorData("s", &session.SessionError{State: "lost", Reason: "r"})
	got := string(encodeErrorData("3", protocol.CodeUnknownSession, "m", data))
	if got != `{"jsonrpc":"2.0","id":3,"error":{"code":-32004,"message":"m","data":{"sessionId":"s","state":"lost","reason":"r"}}}` || !json.Valid([]byte(got)) {
		t.Errorf("−32004 %s", got)
	}
}
