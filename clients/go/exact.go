package coderun

import (
	"bytes"
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"
)

// exactStream is a jsonrpc2 ObjectStream that keeps the exact bytes of the
// params of the request it read last. The library's Request decodes params
// into a map[string]any and marshals them again, which sorts an object's
// keys, replaces a lone surrogate with U+FFFD and escapes <, > and &: a
// program's argument would reach a binding changed. The library calls the
// handler on its read goroutine right after reading a request and before
// reading the next message, so the handler takes the params from here
// (TestC907BindingArgsExact fails if that stops holding). Responses need no
// such care: their result is a json.RawMessage, copied as read.
type exactStream struct {
	jsonrpc2.ObjectStream
	params json.RawMessage // the last request's params; used by the read goroutine only
}

func (s *exactStream) ReadObject(v any) error {
	var body json.RawMessage
	if err := s.ObjectStream.ReadObject(&body); err != nil {
		return err
	}
	s.params = requestParams(body)
	return json.Unmarshal(body, v)
}

// requestParams is the "params" member of a request body exactly as written,
// or nil. The daemon writes a response's "result" before anything else of
// it, so a body whose head holds no "method" member is a response and is not
// decoded a second time.
func requestParams(body []byte) json.RawMessage {
	if !bytes.Contains(body[:min(len(body), 64)], []byte(`"method"`)) {
		return nil
	}
	var m struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	return m.Params
}
