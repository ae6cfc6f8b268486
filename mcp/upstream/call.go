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
// *ServerError. When ctx ends first the call is cancelled upstream. The
// result is billed to b (nil: a budget of Caps.MaxResultBytes for this call
// alone); one it cannot take fails as a *TooLarge.
func (s *Server) Call(ctx context.Context, tool string, args []byte, b *Budget) ([]byte, error) {
	if b == nil {
		b = NewBudget(s.caps.MaxResultBytes)
	}
	cs, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	res, err := cs.call(ctx, tool, arguments(args), b)
	return s.outcome(ctx, cs, tool, res, err, b)
}

// Start begins a call that needs no waiting before it is sent: the server's
// tools are listed and its connection takes direct calls (direct.go). It then
// reports true and done later receives what Call would return, once, on the
// connection's reader goroutine (it must not wait for the server), unless ctx
// ends first: the call is then cancelled upstream and done may not be called.
// function is the binding's name for the tool (see Tools.Tool); the result is
// billed to b as by Call. It reports false, having done nothing, when the
// call must be made with Call.
func (s *Server) Start(ctx context.Context, function string, args []byte, b *Budget, done func([]byte, error)) bool {
	s.mu.Lock()
	cs, tools := s.sess, s.tools
	s.mu.Unlock()
	if cs == nil || tools == nil || cs.direct == nil {
		return false
	}
	tool := tools.Tool(function)
	id, meta, err := cs.direct.newCall(b, func(raw json.RawMessage, err error) {
		res, err := replyResult(raw, err)
		if err == nil && !res.needsInput {
			done(s.outcome(ctx, cs, tool, res, nil, b))
			return
		}
		// Off the reader goroutine: the SDK's round trips need it free, and
		// closing a broken connection (outcome's drop) waits for it.
		go func() {
			if err == nil {
				res, err = cs.viaSDK(ctx, tool, arguments(args))
			}
			done(s.outcome(ctx, cs, tool, res, err, b))
		}()
	})
	if errors.Is(err, errNotListed) {
		return false
	}
	if err == nil {
		err = cs.direct.send(id, tool, arguments(args), meta)
	}
	if err != nil {
		done(s.outcome(ctx, cs, tool, result{}, err, b))
		return true
	}
	// Left registered once the call is answered: abandoning an answered call
	// does nothing, and no goroutine exists until ctx ends.
	context.AfterFunc(ctx, func() { cs.direct.abandon(id, ctx.Err().Error()) })
	return true
}

// arguments is a call's arguments for the wire: nil for none.
func arguments(args []byte) json.RawMessage {
	if len(args) == 0 || string(args) == "null" {
		return nil
	}
	return args
}

// outcome is what Call returns for a call's result or error on cs; a result
// is billed to b.
func (s *Server) outcome(ctx context.Context, cs *link, tool string, res result, err error, b *Budget) ([]byte, error) {
	var bad *badResult
	var large *TooLarge
	switch {
	case err == nil && !b.take(res.size):
		return nil, s.fail(fmt.Errorf("tool %q: %w", tool, b.refusal()))
	case err == nil:
	case ctx.Err() != nil:
		return nil, s.fail(fmt.Errorf("tool %q: call cancelled: %w", tool, context.Cause(ctx)))
	case errors.As(err, &large):
		return nil, s.fail(fmt.Errorf("tool %q: %w", tool, err))
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
func (cs *link) call(ctx context.Context, tool string, args json.RawMessage, b *Budget) (result, error) {
	if cs.direct != nil {
		raw, err := cs.direct.callTool(ctx, tool, args, b)
		if !errors.Is(err, errNotListed) {
			res, err := replyResult(raw, err)
			if err != nil || !res.needsInput {
				return res, err
			}
		}
	}
	return cs.viaSDK(ctx, tool, args)
}

// viaSDK makes the call with the SDK's CallTool.
func (cs *link) viaSDK(ctx context.Context, tool string, args json.RawMessage) (result, error) {
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

// replyResult is a direct call's response read as a result.
func replyResult(raw json.RawMessage, err error) (result, error) {
	if err != nil {
		return result{}, err
	}
	return readResult(raw)
}

// result is what the program's value is made of in a tools/call result: each
// member's raw text, nil when absent.
type result struct {
	content    [][]byte // the content list's items
	structured []byte   // structuredContent, unless null
	isError    bool
	needsInput bool  // the server asks the client for input first (inputRequests)
	size       int64 // the result's whole text, in bytes: what the run is billed
}

// readResult splits a tools/call result. Only the members used are checked:
// content must be a list of objects, isError a boolean. The error is a
// *badResult.
func readResult(raw []byte) (result, error) {
	bad := func(format string, a ...any) (result, error) { return result{}, &badResult{fmt.Errorf(format, a...)} }
	ms, err := wireguard.Members(raw, wireguard.Strict)
	if err != nil {
		return bad("the result is not a JSON object")
	}
	r := result{size: int64(len(raw))}
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
			return bad("isError is %.40s, not a boolean", m.Value)
		}
	}
	if m, ok := wireguard.Last(ms, "content"); ok && wireguard.KindOf(m.Value) != wireguard.KindNull {
		items, ok := wireguard.Elements(m.Value)
		if !ok {
			return bad("content is not a list")
		}
		for i, item := range items {
			if wireguard.KindOf(item) != wireguard.KindObject {
				return bad("content item %d is not an object", i)
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

// errorText is an error result's message: its text items that are not
// empty, one per line.
func (r result) errorText() string {
	var parts []string
	for _, item := range r.content {
		if raw, ok := textOf(item); ok {
			if text, _ := wireguard.DecodeString(raw); text != "" {
				parts = append(parts, text)
			}
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
