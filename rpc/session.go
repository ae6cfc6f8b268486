package rpc

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
)

// NewRunner adapts m, the session.Manager the daemon serves with, to Runner.
func NewRunner(m *session.Manager) Runner { return sessionRunner{m} }

type sessionRunner struct{ m *session.Manager }

func (s sessionRunner) Submit(runID string, p protocol.RunParams, c session.Client, onResult func(protocol.Result)) (Canceler, error) {
	r, err := s.m.Submit(runID, p, c, onResult)
	if err != nil {
		return nil, err // not a nil *Run wrapped in a non-nil Canceler
	}
	return r, nil
}

func (s sessionRunner) Shutdown() { s.m.Shutdown() }

func (s sessionRunner) QueueFull() bool { return s.m.QueueFull() }
