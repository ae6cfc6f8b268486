package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
// value the program receives (SPEC: the structuredContent when present, else
// a single text item's text, else the content list), as JSON text. A tool's
// isError result is a *ToolError; anything else that goes wrong is a
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
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: arguments})
	if err != nil {
		if ctx.Err() != nil {
			return nil, s.fail(fmt.Errorf("tool %q: call cancelled: %w", tool, context.Cause(ctx)))
		}
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || errors.Is(err, mcp.ErrConnectionClosed) {
			s.drop(cs) // the connection broke, not the call: start afresh next time
		}
		return nil, s.fail(fmt.Errorf("tool %q: %w", tool, err))
	}
	if res.IsError {
		return nil, &ToolError{Server: s.spec.Key, Tool: tool, Message: contentText(res.Content)}
	}
	v, err := unwrap(res)
	if err != nil {
		return nil, s.fail(fmt.Errorf("tool %q: result cannot be passed to the program: %w", tool, err))
	}
	return v, nil
}

// unwrap is the value a result hands the program.
func unwrap(res *mcp.CallToolResult) ([]byte, error) {
	switch {
	case res.StructuredContent != nil:
		return json.Marshal(res.StructuredContent)
	case len(res.Content) == 1:
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			return json.Marshal(t.Text)
		}
	}
	if res.Content == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(res.Content)
}

// contentText is an error result's message: its text items, one per line.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return "the tool reported an error without a message"
	}
	return strings.Join(parts, "\n")
}
