package coderun

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/sourcegraph/jsonrpc2"
)

// exactStream is the jsonrpc2 ObjectStream under a Client. It changes two
// things the library would do with what the daemon and the host exchange:
//
//   - A request's params stay exactly as read. The library's Request decodes
//     params into a map[string]any and marshals them again, which sorts an
//     object's keys, replaces a lone surrogate with U+FFFD and escapes <, >
//     and &: a program's argument would reach a binding changed. So the
//     library is handed the request without its params, and the handler,
//     which the library calls on its read goroutine right after reading a
//     request and before reading the next message, takes them from here
//     (TestC907BindingArgsExact fails if that stops holding).
//   - A binding's answer, already canonical JSON, is written as it is
//     (writeResult) rather than through the library's Response, which
//     marshals it three times over: it is the hot path of a program that
//     calls its host in a loop.
//
// Responses to the client's own calls pass to the library unchanged: their
// result is a json.RawMessage, copied as read. An error response with a null
// id (a refused connection: a wrong token, too many connections; this client
// sends nothing else the daemon answers that way) answers no call, so its
// message is kept for the error of the calls the closing connection fails.
type exactStream struct {
	jsonrpc2.ObjectStream
	params json.RawMessage // the last request's params; the read goroutine's only
	// wmu serializes writeResult with the library's writes (its own lock
	// is not reachable, and a WebSocket takes one writer at a time).
	wmu sync.Mutex
	// refusal is the message of the last error response with a null id.
	refusal atomic.Pointer[string]
}

func (s *exactStream) ReadObject(v any) error {
	var body json.RawMessage
	if err := s.ObjectStream.ReadObject(&body); err != nil {
		return err
	}
	s.params = nil
	if slim, params, ok := withoutParams(body); ok {
		body, s.params = slim, params
	} else if msg, ok := nullIDError(body); ok {
		s.refusal.Store(&msg)
	}
	return json.Unmarshal(body, v)
}

func (s *exactStream) WriteObject(obj any) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.ObjectStream.WriteObject(obj)
}

// writeResult answers request id with result, a canonical JSON value.
func (s *exactStream) writeResult(id jsonrpc2.ID, result json.RawMessage) error {
	b := make([]byte, 0, len(result)+64)
	b = appendID(append(b, `{"jsonrpc":"2.0","id":`...), id)
	b = append(append(append(b, `,"result":`...), result...), '}')
	return s.WriteObject(json.RawMessage(b))
}

// appendID appends id as JSON: a number's digits directly (the library's
// ID.MarshalJSON goes through encoding/json's reflection for each answer),
// a string through encoding/json, which escapes it as JSON.
func appendID(b []byte, id jsonrpc2.ID) []byte {
	if !id.IsString {
		return strconv.AppendUint(b, id.Num, 10)
	}
	quoted, _ := json.Marshal(id.Str) // a string always marshals
	return append(b, quoted...)
}

// withoutParams splits a request body into the request without its params
// and the params exactly as written. The daemon writes a response's "result"
// before anything else of it, so a body whose head holds no "method" member
// is a response, ok is false, and it is not decoded a second time.
func withoutParams(body []byte) (slim, params json.RawMessage, ok bool) {
	if !bytes.Contains(body[:min(len(body), 64)], []byte(`"method"`)) {
		return nil, nil, false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method == nil {
		return nil, nil, false
	}
	slim = append(slim, `{"jsonrpc":"2.0",`...)
	if m.ID != nil {
		slim = append(append(append(slim, `"id":`...), m.ID...), ',')
	}
	slim = append(append(append(slim, `"method":`...), m.Method...), '}')
	return slim, m.Params, true
}

// nullIDError is the message of an error response whose id is null.
func nullIDError(body []byte) (string, bool) {
	if !bytes.Contains(body[:min(len(body), 64)], []byte(`"id":null`)) {
		return "", false
	}
	var m struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil || m.Error == nil {
		return "", false
	}
	return m.Error.Message, true
}
