package rpc

import (
	"errors"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
	"github.com/coderun-rpc/coderun-rpc/wire"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// sessionsOn reports whether session/* are served.
func (s *Server) sessionsOn() bool {
	return s.opts.Sessions != nil && s.opts.Daemon.MaxSessions > 0
}

type sessionIDResult struct {
	SessionID string `json:"sessionId"`
}

// sessionOpen validates session/open and opens the session from a
// goroutine (booting a child takes milliseconds; the read loop goes on).
func (s *Server) sessionOpen(id reqID, params []byte) {
	p, err := wire.ValidateSessionOpen(params, s.opts.Daemon.Limits, s.opts.Daemon.SessionIdleMs, s.opts.Daemon.Packages, s.opts.Daemon.Egress)
	s.newSession(id, "", err, func() (string, error) { return s.opts.Sessions.OpenSession(p, s.notifyClosed) })
}

// sessionFork validates session/fork, gives the fork its place in the
// source's queue in arrival order, and forks from a goroutine (the fork
// waits for the runs queued before it).
func (s *Server) sessionFork(id reqID, params []byte) {
	src, err := wire.ValidateSessionRef(params)
	if err != nil {
		s.newSession(id, src, err, nil)
		return
	}
	s.newSession(id, src, nil, s.opts.Sessions.ForkSession(src, s.notifyClosed))
}

// newSession answers invalid params (invalid), or makes the session from a
// goroutine and answers {sessionId} or the refusal (about ref, the source of
// a fork).
func (s *Server) newSession(id reqID, ref string, invalid error, create func() (string, error)) {
	if invalid != nil {
		s.w.replyError(&id, protocol.CodeInvalidParams, invalid.Error())
		return
	}
	s.async(id, func() {
		sid, err := create()
		if err != nil {
			s.sessionError(id, ref, err)
			return
		}
		s.w.reply(id, sessionIDResult{SessionID: sid})
	})
}

// sessionClose ends the session now, in arrival order, and answers null
// once its child is gone.
func (s *Server) sessionClose(id reqID, params []byte) {
	sid, err := wire.ValidateSessionRef(params)
	if err != nil {
		s.w.replyError(&id, protocol.CodeInvalidParams, err.Error())
		return
	}
	wait, err := s.opts.Sessions.CloseSession(sid)
	if err != nil {
		s.sessionError(id, sid, err)
		return
	}
	s.async(id, func() {
		wait()
		s.w.reply(id, nil)
	})
}

// async runs answer in a goroutine with id pending until it returns.
func (s *Server) async(id reqID, answer func()) {
	s.mu.Lock()
	s.pending[id.text] = true
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.pending, id.text)
			s.mu.Unlock()
		}()
		answer()
	}()
}

// sessionError answers a refused session request: −32003 for the cap,
// −32004 with {sessionId, state, reason?} for an id that is not open,
// −32600 while shutting down, else −32603.
func (s *Server) sessionError(id reqID, sid string, err error) {
	var se *session.SessionError
	switch {
	case errors.As(err, &se) && se.Cap:
		s.w.replyError(&id, protocol.CodeSessionCap, se.Message)
	case errors.As(err, &se):
		s.w.frame(encodeErrorData(id.text, protocol.CodeUnknownSession, se.Message, sessionErrorData(sid, se)))
	case errors.Is(err, session.ErrShuttingDown):
		s.w.replyError(&id, protocol.CodeInvalidRequest, protocol.MsgShuttingDown)
	case errors.As(err, new(*wheelset.InstallError)):
		s.w.replyError(&id, protocol.CodeInvalidParams, err.Error()) // the packages cannot be had
	default:
		s.w.replyError(&id, protocol.CodeInternalError, err.Error())
	}
}

// sessionErrorData is −32004's data member.
func sessionErrorData(sid string, se *session.SessionError) []byte {
	b := wireguard.AppendString([]byte(`{"sessionId":`), sid)
	b = wireguard.AppendString(append(b, `,"state":`...), se.State)
	if se.Reason != "" {
		b = wireguard.AppendString(append(b, `,"reason":`...), se.Reason)
	}
	return append(b, '}')
}

// notifyClosed sends session/closed.
func (s *Server) notifyClosed(sid, reason, message string) {
	s.w.frame(encodeSessionClosed(sid, reason, message))
}
