package rpc

import (
	"log/slog"

	"github.com/coderun-rpc/coderun-rpc/config"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
)

// NewRunner builds the session.Manager the daemon serves with and adapts it
// to Runner.
func NewRunner(cfg *config.Config, log *slog.Logger) Runner {
	return sessionRunner{session.NewManager(session.Config{
		Python:        cfg.Python,
		Limits:        cfg.Limits,
		Grace:         cfg.Grace(),
		MaxConcurrent: cfg.MaxConcurrentRuns,
		MaxQueued:     cfg.MaxQueuedRuns,
		WarmPool:      cfg.WarmPool,
		Logger:        log,
		Isolation:     cfg.Isolation,
		StartMode:     cfg.StartMode,
	})}
}

type sessionRunner struct{ m *session.Manager }

func (s sessionRunner) Submit(runID string, p protocol.RunParams, c session.Client, onResult func(protocol.Result)) (Canceler, error) {
	r, err := s.m.Submit(runID, p, c, onResult)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (s sessionRunner) Shutdown() { s.m.Shutdown() }

func (s sessionRunner) QueueFull() bool { return s.m.QueueFull() }
