package rpc

import (
	"errors"
	"sync/atomic"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wire"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// runEntry is one accepted run in the cancel registry. It is registered when
// the request is read (before it is queued) and removed in the function that
// sends its one response (CONTRIBUTING.md habit 2).
type runEntry struct {
	id       string
	run      wire.Canceler // set once Submit returns (read loop only)
	answered atomic.Bool
}

// run validates and submits a run request (docs/protocol.md §3.4, docs/configuration.md §4).
func (s *Server) run(id reqID, params []byte) {
	if s.opts.Runner.QueueFull() { // before params validation (docs/protocol.md §3.4)
		s.w.replyError(&id, protocol.CodeQueueFull, protocol.MsgQueueFull)
		return
	}
	p, err := wire.ValidateRunEgress(params, s.opts.Daemon.Limits, s.opts.Daemon.Packages, s.opts.Daemon.Egress)
	if err == nil {
		err = wire.CheckMCPServers(s.opts.MCP, p.Bindings)
	}
	if err != nil {
		s.w.replyError(&id, protocol.CodeInvalidParams, err.Error())
		return
	}
	e := &runEntry{id: id.text}
	s.mu.Lock()
	s.runs[id.text] = e
	s.pending[id.text] = true
	s.mu.Unlock()
	c := &runClient{s: s, stream: p.Stream}
	run, err := s.opts.Runner.Submit(id.text, p, c, func(r protocol.Result) { s.finishRun(e, r) })
	if err != nil {
		s.forget(e)
		var se *session.SessionError
		if errors.As(err, &se) {
			s.sessionError(id, p.SessionID, err)
			return
		}
		code, msg := int64(protocol.CodeInvalidRequest), protocol.MsgShuttingDown
		if errors.Is(err, session.ErrQueueFull) {
			code, msg = protocol.CodeQueueFull, protocol.MsgQueueFull
		} else if !errors.Is(err, session.ErrShuttingDown) {
			s.log.Error("run refused", "id", id.text, "err", err)
		}
		s.w.replyError(&id, code, msg)
		return
	}
	e.run = run
}

// finishRun sends a run's one response. The registry entry goes first, so a
// client that reuses the id after reading the response is not refused.
func (s *Server) finishRun(e *runEntry, r protocol.Result) {
	if !e.answered.CompareAndSwap(false, true) {
		s.log.Error("second result for a run dropped", "id", e.id)
		return
	}
	s.forget(e)
	s.w.pieces(func(put func([]byte)) { emitRunResponse(e.id, r, put) })
}

func (s *Server) forget(e *runEntry) {
	s.mu.Lock()
	if s.runs[e.id] == e {
		delete(s.runs, e.id)
		delete(s.pending, e.id)
	}
	s.mu.Unlock()
}

// cancelRun handles $/cancelRequest {id}: unknown, finished or malformed ids
// are ignored (docs/protocol.md §4.3).
func (s *Server) cancelRun(params []byte) {
	ms, err := wireguard.Members(params, wireguard.Strict)
	if err != nil {
		return
	}
	m, ok := wireguard.Last(ms, "id")
	id := usableID(m, ok)
	if id == nil {
		return
	}
	s.mu.Lock()
	e := s.runs[id.text]
	s.mu.Unlock()
	if e != nil && e.run != nil {
		e.run.Cancel()
	}
}
