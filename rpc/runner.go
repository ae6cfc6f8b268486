package rpc

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
)

// Runner is what the server needs from session.Manager (NewRunner adapts
// one; tests use fakes). Submit queues a run; onResult is called exactly
// once. Submit's errors are session.ErrQueueFull and session.ErrShuttingDown.
type Runner interface {
	Submit(runID string, p protocol.RunParams, c session.Client, onResult func(protocol.Result)) (Canceler, error)
	// Shutdown decides every run abort and returns once all are quiescent.
	Shutdown()
	// QueueFull reports whether a Submit now would fail with ErrQueueFull
	// (checked before params validation, docs/protocol.md §3.4).
	QueueFull() bool
}

// Canceler cancels one submitted run; safe to call at any time, repeatedly.
type Canceler interface{ Cancel() }
