package rpc

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

const msgBadUTF8 = "parse error: the message body is not valid UTF-8"

// handle processes one body in arrival order. exit reports that the process
// should exit with code. The body is scanned in Lax mode: invalid UTF-8 is a
// parse error of its own, except inside the result of a response, which
// answers its binding/call as a lossy value (docs/child-protocol-wire.md §2.9).
func (s *Server) handle(body []byte) (code int, exit bool) {
	ms, err := wireguard.Members(body, wireguard.Lax)
	switch {
	case errors.Is(err, wireguard.ErrNotObject) && !wireguard.Valid(body, wireguard.Strict):
		s.w.replyError(nil, protocol.CodeParseError, msgBadUTF8)
		return 0, false
	case errors.Is(err, wireguard.ErrNotObject):
		s.w.replyError(nil, protocol.CodeInvalidRequest, "invalid request: not a JSON-RPC request or response object")
		return 0, false
	case err != nil:
		s.w.replyError(nil, protocol.CodeParseError, "parse error: the message body is not valid JSON")
		return 0, false
	}
	badOutsideResult := false
	for _, m := range ms {
		if m.BadUTF8 && m.Name != "result" { // a name with invalid UTF-8 is never "result"
			badOutsideResult = true
		}
	}
	idm, hasID := wireguard.Last(ms, "id")
	mm, hasMethod := wireguard.Last(ms, "method")
	res, hasResult := wireguard.Last(ms, "result")
	em, hasError := wireguard.Last(ms, "error")
	if badOutsideResult || (hasMethod && res.BadUTF8) {
		s.w.replyError(nil, protocol.CodeParseError, msgBadUTF8)
		return 0, false
	}
	if !hasMethod {
		s.response(idm, hasID, res, hasResult, em, hasError)
		return 0, false
	}
	method, ok := wireguard.DecodeString(mm.Value)
	if !ok {
		s.w.replyError(usableID(idm, hasID), protocol.CodeInvalidRequest, "invalid request: method must be a string")
		return 0, false
	}
	params, hasParams := wireguard.Last(ms, "params")
	var praw []byte
	if hasParams {
		praw = params.Value
	}
	if !hasID {
		return s.notification(method, praw)
	}
	id := usableID(idm, true)
	if id == nil {
		s.w.replyError(nil, protocol.CodeInvalidRequest, "unsupported request id")
		return 0, false
	}
	s.request(*id, method, praw)
	return 0, false
}

// response handles a message without a method. With the id of an
// outstanding binding/call it is that call's answer, whatever it holds
// (docs/child-protocol-wire.md §2.9, more precise than docs/protocol.md §2 here); other responses
// are ignored; anything else is not a JSON-RPC message.
func (s *Server) response(idm wireguard.Member, hasID bool, res wireguard.Member, hasResult bool, em wireguard.Member, hasError bool) {
	if k, id := s.takeCall(idm, hasID); k != nil {
		s.answerCall(k, id, res, hasResult, em, hasError)
		return
	}
	switch {
	case res.BadUTF8:
		s.w.replyError(nil, protocol.CodeParseError, msgBadUTF8)
	case hasResult || hasError:
		s.log.Debug("response matches no outstanding binding/call; ignored", "id", string(idm.Value))
	default:
		s.w.replyError(usableID(idm, hasID), protocol.CodeInvalidRequest,
			"invalid request: no method, result or error member")
	}
}

// usableID parses a request id: a string, or a non-negative integer written
// in digits up to 2^63 − 1. nil when absent or unusable.
func usableID(m wireguard.Member, present bool) *reqID {
	if !present {
		return nil
	}
	switch wireguard.KindOf(m.Value) {
	case wireguard.KindString:
		str, ok := wireguard.DecodeString(m.Value)
		if !ok {
			return nil
		}
		return &reqID{text: string(wireguard.AppendString(nil, str))}
	case wireguard.KindNumber:
		if !allDigits(string(m.Value)) {
			return nil
		}
		n, err := strconv.ParseUint(string(m.Value), 10, 64)
		if err != nil || n > 1<<63-1 {
			return nil
		}
		return &reqID{text: string(m.Value)}
	}
	return nil
}

// request dispatches a request with a usable id: the lifecycle's rules
// first, then the methods table (methods.go), the one list of what is served.
func (s *Server) request(id reqID, method string, params []byte) {
	s.mu.Lock()
	st, inUse := s.state, s.pending[id.text]
	s.mu.Unlock()
	s.log.Debug("request", "id", id.text, "method", method, "state", st)
	switch {
	case inUse:
		s.w.replyError(&id, protocol.CodeInvalidRequest, "request id is already in use")
	case st == stateShuttingDown:
		s.w.replyError(&id, protocol.CodeInvalidRequest, protocol.MsgShuttingDown)
	case st == stateCreated && method != protocol.MethodInitialize:
		s.w.replyError(&id, protocol.CodeNotInitialized, "server not initialized")
	case method == protocol.MethodInitialize:
		s.initialize(id, st, params)
	case method == protocol.MethodDiscover:
		s.w.reply(id, json.RawMessage(OpenRPC()))
	default:
		if m := servedRequest(method); m != nil && (!m.sessions || s.sessionsOn()) {
			m.serve(s, id, params)
			return
		}
		s.w.replyError(&id, protocol.CodeMethodNotFound, "method not found: "+method)
	}
}

// notification handles a message without an id; it is never answered.
func (s *Server) notification(method string, params []byte) (int, bool) {
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	s.log.Debug("notification", "method", method, "state", st)
	if method == protocol.MethodExit {
		return s.exit(), true
	}
	if st == stateCreated {
		s.log.Debug("notification before initialize dropped", "method", method)
		return 0, false
	}
	switch method {
	case protocol.MethodInitialized:
	case protocol.MethodCancelRequest:
		if st == stateShuttingDown {
			// Arrival order (docs/protocol.md §4.3): shutdown came first and
			// decides every run as "server is shutting down".
			return 0, false
		}
		s.cancelRun(params)
	default:
		s.log.Warn("notification ignored", "method", method)
	}
	return 0, false
}
