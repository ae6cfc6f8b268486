package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/wireguard"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolError is a tool's own failure (a result with isError): the program
// sees it as McpToolError.
type ToolError struct {
	Server, Tool, Message string
}

func (e *ToolError) Error() string { return e.Message }

// Call calls tool with args (a JSON object's text, or null) and returns the
// value the program receives (docs/mcp.md: the structuredContent when present,
// else a single text item's text, else the content list), as JSON text. A
// tool's isError result is a *ToolError; anything else that goes wrong is a
// *ServerError. When ctx ends first the call is cancelled upstream.
func (s *Server) Call(ctx context.Context, tool string, args []byte) ([]byte, error) {
	cs, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	var arguments json.RawMessage
	if len(args) > 0 && string(args) != "null" {
		arguments = args
	}
	res, err := cs.call(ctx, tool, arguments)
	var bad *badResult
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, s.fail(fmt.Errorf("tool %q: call cancelled: %w", tool, context.Cause(ctx)))
	case errors.As(err, &bad):
		return nil, s.fail(fmt.Errorf("tool %q: result cannot be passed to the program: %w", tool, bad.err))
	default:
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || errors.Is(err, mcp.ErrConnectionClosed) {
			s.drop(cs) // the connection broke, not the call: start afresh next time
		}
		return nil, s.fail(fmt.Errorf("tool %q: %w", tool, err))
	}
	if res.isError {
		return nil, &ToolError{Server: s.spec.Key, Tool: tool, Message: res.errorText()}
	}
	return res.value(), nil
}

// badResult is a result that is not a tools/call result.
type badResult struct{ err error }

func (e *badResult) Error() string { return e.err.Error() }

// call makes the call directly on a stdio connection that allows it
// (direct.go), else, or when the server asks for input first, through the
// SDK.
func (cs *link) call(ctx context.Context, tool string, args json.RawMessage) (result, error) {
	if cs.direct != nil {
		if meta, ok := cs.direct.listed(); ok {
			raw, err := cs.direct.callTool(ctx, tool, args, meta)
			if err != nil {
				return result{}, err
			}
			if res, err := readResult(raw); err != nil || !res.needsInput {
				return res, err
			}
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return result{}, err
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return result{}, &badResult{err}
	}
	return readResult(raw)
}

// result is what the program's value is made of in a tools/call result: each
// member's raw text, nil when absent.
type result struct {
	content    [][]byte // the content list's items
	structured []byte   // structuredContent, unless null
	isError    bool
	needsInput bool // the server asks the client for input first (inputRequests)
}

// readResult splits a tools/call result. Only the members used are checked:
// content must be a list of objects, isError a boolean. The error is a
// *badResult.
func readResult(raw []byte) (result, error) {
	r, err := splitResult(raw)
	if err != nil {
		return result{}, &badResult{err}
	}
	return r, nil
}

func splitResult(raw []byte) (result, error) {
	ms, err := wireguard.Members(raw, wireguard.Strict)
	if err != nil {
		return result{}, fmt.Errorf("the result is not a JSON object")
	}
	var r result
	if m, ok := wireguard.Last(ms, "inputRequests"); ok && wireguard.KindOf(m.Value) != wireguard.KindNull {
		r.needsInput = true
	}
	if m, ok := wireguard.Last(ms, "structuredContent"); ok && wireguard.KindOf(m.Value) != wireguard.KindNull {
		r.structured = m.Value
	}
	if m, ok := wireguard.Last(ms, "isError"); ok {
		switch string(m.Value) {
		case "true":
			r.isError = true
		case "false", "null":
		default:
			return result{}, fmt.Errorf("isError is %.40s, not a boolean", m.Value)
		}
	}
	if m, ok := wireguard.Last(ms, "content"); ok && wireguard.KindOf(m.Value) != wireguard.KindNull {
		items, ok := wireguard.Elements(m.Value)
		if !ok {
			return result{}, fmt.Errorf("content is not a list")
		}
		for i, item := range items {
			if wireguard.KindOf(item) != wireguard.KindObject {
				return result{}, fmt.Errorf("content item %d is not an object", i)
			}
		}
		r.content = items
	}
	return r, nil
}

// value is the JSON text a successful result hands the program.
func (r result) value() []byte {
	if r.structured != nil {
		return r.structured
	}
	if len(r.content) == 1 {
		if text, ok := textOf(r.content[0]); ok {
			return text
		}
	}
	return append(append([]byte("["), bytes.Join(r.content, []byte(","))...), ']')
}

// errorText is an error result's message: its text items, one per line.
func (r result) errorText() string {
	var parts []string
	for _, item := range r.content {
		if raw, ok := textOf(item); ok {
			text, _ := wireguard.DecodeString(raw)
			parts = append(parts, text)
		}
	}
	if len(parts) == 0 {
		return "the tool reported an error without a message"
	}
	return strings.Join(parts, "\n")
}

// textOf is a text item's text, as its raw JSON string.
func textOf(item []byte) ([]byte, bool) {
	ms, err := wireguard.Members(item, wireguard.Strict)
	if err != nil {
		return nil, false
	}
	kind, _ := wireguard.Last(ms, "type")
	text, ok := wireguard.Last(ms, "text")
	if string(kind.Value) != `"text"` || !ok || wireguard.KindOf(text.Value) != wireguard.KindString {
		return nil, false
	}
	return text.Value, true
}
