package rpc

import (
	"errors"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Runner is what the server needs from session.Manager (SessionRunner adapts
// one). Submit queues a run; onResult is called exactly once.
type Runner interface {
	Submit(runID string, p protocol.RunParams, c Client, onResult func(protocol.Result)) (Canceler, error)
	// Shutdown decides every run abort and returns once all are quiescent.
	Shutdown()
	// QueueFull reports whether a Submit now would fail with ErrQueueFull
	// (checked before params validation, CHILD-CONTRACT §1.6).
	QueueFull() bool
}

// Canceler cancels one submitted run; safe to call at any time, repeatedly.
type Canceler interface{ Cancel() }

// Client mirrors session.Client (the server implements it for each run).
type Client interface {
	CallBinding(runID string, namespace, function string, args []byte, answer func(Answer)) (cancel func())
	Log(runID string, ev protocol.LogEvent)
}

// Answer mirrors session.Answer: the client's response to a binding/call.
type Answer struct {
	HasResult bool
	Result    []byte
	HasError  bool
	Message   *string
}

// Errors a Runner returns from Submit (SessionRunner maps session's).
var (
	ErrQueueFull    = errors.New(protocol.MsgQueueFull)
	ErrShuttingDown = errors.New(protocol.MsgShuttingDown)
)
