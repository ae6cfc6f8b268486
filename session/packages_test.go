package session

import (
	"errors"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/internal/wheeltest"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
)

// C853: a session whose packages are installing counts against the
// session cap (session/open cannot start installations past it), and
// Shutdown stops the installation instead of waiting for it.
func TestSessionPackagesCountAndStopC853(t *testing.T) {
	leakcheck.Check(t)
	uv, started := wheeltest.HangingUV(t)
	allow, _ := wheelset.ParseAllowList("*")
	root := t.TempDir()
	t.Cleanup(func() { wheeltest.Unseal(root) })
	cache, err := wheelset.Open(wheelset.Options{UV: uv, Python: realPython(t), Root: root,
		FindLinks: []string{wheeltest.Tiny(t)}, Allow: allow, Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, func(c *Config) { c.MaxSessions, c.Packages = 1, cache })
	opened := make(chan error, 1)
	go func() {
		_, err := m.OpenSession(protocol.SessionParams{Packages: []string{"tinya"}}, nil)
		opened <- err
	}()
	wheeltest.AwaitFile(t, started, opened)
	var se *SessionError
	if _, err := m.OpenSession(protocol.SessionParams{}, nil); !errors.As(err, &se) || !se.Cap {
		t.Errorf("a second session while the first installs: %v, want the cap", err)
	}
	stopped := make(chan struct{})
	go func() { m.Shutdown(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(60 * time.Second): // a hang, not a timing: the installation sleeps 600 s
		t.Fatal("Shutdown waited for the session's installation")
	}
	select {
	case err := <-opened:
		if err == nil {
			t.Error("the installing session opened after Shutdown")
		}
	case <-time.After(60 * time.Second): // a hang, as above
		t.Fatal("the installing session/open is still waiting after Shutdown")
	}
}
