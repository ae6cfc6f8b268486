package rpc

import (
	"strconv"
	"sync"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

var _ session.Client = (*runClient)(nil)

// call is one outstanding binding/call request. mu makes "answer at most
// once, never after cancel" hold across the read loop and the canceller.
type call struct {
	mu     sync.Mutex
	done   bool
	answer func(session.Answer)
}

// runClient implements session.Client for one run, and session's optional
// Flush: binding/call, run/log and $/cancelRequest messages are buffered until
// the run's deliveries flush (session flushes after every burst).
type runClient struct {
	s      *Server
	stream bool
}

// CallBinding sends binding/call with an id from the daemon's own counter
// (from 1) and returns its cancel: $/cancelRequest {id} if still outstanding.
func (c *runClient) CallBinding(runID, namespace, function string, args []byte, answer func(session.Answer)) func() {
	return c.CallBindingTraced(runID, namespace, function, args, "", answer)
}

// CallBindingTraced is CallBinding with a traceparent (TracedCaller).
func (c *runClient) CallBindingTraced(runID, namespace, function string, args []byte, traceparent string, answer func(session.Answer)) func() {
	s := c.s
	id := s.callSeq.Add(1)
	k := &call{answer: answer}
	s.mu.Lock()
	s.calls[id] = k
	s.mu.Unlock()
	s.w.buffer(encodeBindingCall(id, runID, namespace, function, args, traceparent))
	return func() {
		k.mu.Lock()
		was := k.done
		k.done = true
		k.mu.Unlock()
		s.mu.Lock()
		delete(s.calls, id)
		s.mu.Unlock()
		if !was {
			s.w.buffer(encodeCancel(id))
		}
	}
}

// Log sends one run/log notification (only for runs with stream: true).
func (c *runClient) Log(runID string, ev protocol.LogEvent) {
	if c.stream {
		c.s.w.buffer(encodeRunLog(runID, ev))
	}
}

// Flush writes the messages buffered by CallBinding, Log and the cancels.
func (c *runClient) Flush() { c.s.w.flush() }

// takeCall removes and returns the outstanding binding/call whose id the
// message carries, or nil.
func (s *Server) takeCall(idm wireguard.Member, hasID bool) (*call, uint64) {
	if !hasID || !allDigits(string(idm.Value)) {
		return nil, 0
	}
	n, err := strconv.ParseUint(string(idm.Value), 10, 64)
	if err != nil {
		return nil, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.calls[n]
	delete(s.calls, n)
	return k, n
}

// answerCall answers call k with a client response; one with neither a
// result nor a non-null error reaches the program as an unrenderable
// rejection (docs/child-protocol-wire.md §2.9).
func (s *Server) answerCall(k *call, id uint64, res wireguard.Member, hasResult bool, em wireguard.Member, hasError bool) {
	a := session.Answer{}
	if hasError && wireguard.KindOf(em.Value) != wireguard.KindNull {
		a.HasError = true
		if ems, err := wireguard.Members(em.Value, wireguard.Strict); err == nil {
			if mm, ok := wireguard.Last(ems, "message"); ok {
				if msg, ok := wireguard.DecodeString(mm.Value); ok {
					a.Message = &msg
				}
			}
			a.ErrorType = errorType(ems)
		}
	}
	if hasResult {
		a.HasResult = true
		a.Result = res.Value
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.done {
		k.done = true
		s.log.Debug("binding answered", "id", id)
		k.answer(a)
	}
}

// errorType is the client's error.data.type when it names one of
// protocol.HostErrorTypes, else "".
func errorType(errorMembers []wireguard.Member) string {
	dm, ok := wireguard.Last(errorMembers, "data")
	if !ok || wireguard.KindOf(dm.Value) != wireguard.KindObject {
		return ""
	}
	dms, err := wireguard.Members(dm.Value, wireguard.Strict)
	if err != nil {
		return ""
	}
	tm, ok := wireguard.Last(dms, "type")
	if !ok {
		return ""
	}
	if name, ok := wireguard.DecodeString(tm.Value); ok && protocol.IsHostErrorType(name) {
		return name
	}
	return ""
}
