package rpc

import (
	"strconv"
	"unicode/utf8"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/sourcegraph/jsonrpc2"
)

// handle processes one body in arrival order. exit reports that the process
// should exit with code.
func (s *Server) handle(body []byte) (code int, exit bool) {
	i := skipSpace(body, 0)
	r, err := scanValue(body, i, true)
	if err != nil || skipSpace(body, r.end) != len(body) {
		s.w.replyError(nil, protocol.CodeParseError, "parse error: the message body is not valid JSON")
		return 0, false
	}
	ms, ok := objectMembers(body[i:r.end], true)
	if !ok {
		if r.badUTF8 {
			s.w.replyError(nil, protocol.CodeParseError, "parse error: the message body is not valid UTF-8")
			return 0, false
		}
		s.w.replyError(nil, protocol.CodeInvalidRequest, "invalid request: not a JSON-RPC request or response object")
		return 0, false
	}
	badOutsideResult := false
	for _, m := range ms {
		if m.bad && m.name != "result" {
			badOutsideResult = true
		}
	}
	idm, hasID := lookup(ms, "id")
	mm, hasMethod := lookup(ms, "method")
	res, hasResult := lookup(ms, "result")
	em, hasError := lookup(ms, "error")
	if badOutsideResult || (hasMethod && res.bad) {
		s.w.replyError(nil, protocol.CodeParseError, "parse error: the message body is not valid UTF-8")
		return 0, false
	}
	if !hasMethod {
		s.response(idm, hasID, res, hasResult, em, hasError)
		return 0, false
	}
	method, ok := decodeString(mm.raw)
	if !ok {
		s.w.replyError(usableID(idm, hasID), protocol.CodeInvalidRequest, "invalid request: method must be a string")
		return 0, false
	}
	params, hasParams := lookup(ms, "params")
	var praw []byte
	if hasParams {
		praw = params.raw
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
// (CHILD-CONTRACT §2.9, more precise than SPEC §2 here); other responses
// are ignored; anything else is not a JSON-RPC message.
func (s *Server) response(idm member, hasID bool, res member, hasResult bool, em member, hasError bool) {
	if k, id := s.takeCall(idm, hasID); k != nil {
		s.answerCall(k, id, res, hasResult, em, hasError)
		return
	}
	switch {
	case res.bad:
		s.w.replyError(nil, protocol.CodeParseError, "parse error: the message body is not valid UTF-8")
	case hasResult || hasError:
		s.log.Debug("response matches no outstanding binding/call; ignored", "id", string(idm.raw))
	default:
		s.w.replyError(usableID(idm, hasID), protocol.CodeInvalidRequest,
			"invalid request: no method, result or error member")
	}
}

// usableID parses a request id: a string, or a non-negative integer written
// in digits up to 2^63 − 1. nil when absent or unusable.
func usableID(m member, present bool) *reqID {
	if !present {
		return nil
	}
	switch jsonKind(m.raw) {
	case '"':
		str, ok := decodeString(m.raw)
		if !ok {
			return nil
		}
		return &reqID{text: quote(str), jid: jsonrpc2.ID{Str: str, IsString: true}, safe: utf8.ValidString(str)}
	case '0':
		if !allDigits(string(m.raw)) {
			return nil
		}
		n, err := strconv.ParseUint(string(m.raw), 10, 64)
		if err != nil || n > 1<<63-1 {
			return nil
		}
		return &reqID{text: string(m.raw), jid: jsonrpc2.ID{Num: n}, safe: true}
	}
	return nil
}

// request dispatches a request with a usable id.
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
	case method == protocol.MethodShutdown:
		s.shutdown(id)
	case method == protocol.MethodRun:
		s.run(id, params)
	default:
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
			// Arrival order (CHILD-CONTRACT §1.7): shutdown came first and
			// decides every run as "server is shutting down".
			return 0, false
		}
		s.cancelRun(params)
	default:
		s.log.Warn("notification ignored", "method", method)
	}
	return 0, false
}
