package wire

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
)

// Runner is what a front end needs from session.Manager (rpc.NewRunner adapts
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

// TracedCaller is implemented by the session.Client rpc gives each run: a
// binding call that carries a W3C traceparent in its params ("" for none),
// so the host's span for the call nests under the daemon's (docs/service.md §7).
type TracedCaller interface {
	CallBindingTraced(runID, namespace, function string, args []byte, traceparent string, answer func(session.Answer)) func()
}

// Sessions is what a front end needs for persistent sessions
// (docs/protocol-sessions.md §11); rpc.NewRunner's value implements it. With
// rpc.Options.Sessions nil (or Daemon.MaxSessions 0) session/* are unknown
// methods. OpenSession blocks until the child is ready; ForkSession takes
// the fork's place in its source's queue at once and returns the call,
// made exactly once, that blocks until the fork is ready;
// CloseSession ends the session at once (later requests on its id are
// refused) and its wait blocks until the child is gone. Refusals are
// *session.SessionError, session.ErrShuttingDown or an internal failure.
type Sessions interface {
	OpenSession(p protocol.SessionParams, onClosed func(id, reason, message string)) (string, error)
	ForkSession(id string, onClosed func(id, reason, message string)) (fork func() (string, error))
	CloseSession(id string) (wait func(), err error)
}
