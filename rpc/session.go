package rpc

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// NewRunner adapts m, the session.Manager the daemon serves with, to Runner
// (and to Sessions).
func NewRunner(m *session.Manager) wire.Runner { return sessionRunner{m} }

type sessionRunner struct{ m *session.Manager }

// NewSessions adapts m to Sessions.
func NewSessions(m *session.Manager) wire.Sessions { return sessionRunner{m} }

func (s sessionRunner) OpenSession(p protocol.SessionParams, onClosed func(id, reason, message string)) (string, error) {
	return s.m.OpenSession(p, onClosed)
}

func (s sessionRunner) ForkSession(id string, onClosed func(id, reason, message string)) func() (string, error) {
	return s.m.ForkSession(id, onClosed)
}

func (s sessionRunner) CloseSession(id string) (func(), error) { return s.m.CloseSession(id) }

func (s sessionRunner) Submit(runID string, p protocol.RunParams, c session.Client, onResult func(protocol.Result)) (wire.Canceler, error) {
	r, err := s.m.Submit(runID, p, c, onResult)
	if err != nil {
		return nil, err // not a nil *Run wrapped in a non-nil Canceler
	}
	return r, nil
}

func (s sessionRunner) Shutdown() { s.m.Shutdown() }

func (s sessionRunner) QueueFull() bool { return s.m.QueueFull() }
