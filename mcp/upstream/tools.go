package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/coderun-rpc/coderun-rpc/typed"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tools is a server's tool list as typed binding functions: one per tool, in
// the server's order, plus, for a tool whose name is not an identifier, one
// under its identifier form when that collides with nothing (docs/mcp.md: reachable
// as everything["get-sum"] and everything.get_sum). Immutable.
type Tools struct {
	Functions []*typed.Function
	tool      map[string]string // function name → the tool it calls
}

// Tool is the upstream tool a call of function calls: the one it names,
// else function itself (for the server to refuse when it has no such tool).
func (t *Tools) Tool(function string) string {
	if tool := t.tool[function]; tool != "" {
		return tool
	}
	return function
}

// Tools lists the server's tools (connecting first if needed); the list is
// cached until the server says it changed or the connection ends.
func (s *Server) Tools(ctx context.Context) (*Tools, error) {
	s.mu.Lock()
	t := s.tools
	s.mu.Unlock()
	if t != nil {
		return t, nil
	}
	cs, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	var list []*mcp.Tool
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, s.fail(fmt.Errorf("listing tools: %w", err))
		}
		list = append(list, tool)
	}
	t = s.convert(list)
	s.mu.Lock()
	if s.sess == cs {
		s.tools = t
	}
	s.mu.Unlock()
	return t, nil
}

// convert compiles each tool as a typed function. A schema the typed package
// refuses (a remote $ref, an unsupported keyword) is dropped with a warning:
// the tool stays callable, only unchecked on that side.
func (s *Server) convert(list []*mcp.Tool) *Tools {
	t := &Tools{tool: make(map[string]string, len(list))}
	for _, tool := range list {
		t.tool[tool.Name] = tool.Name
	}
	for i, tool := range list {
		at := fmt.Sprintf("mcp server %q tool %q", s.spec.Key, tool.Name)
		fn := s.compile(at, i, tool.Name, tool)
		t.Functions = append(t.Functions, fn)
		if alias := Identifier(tool.Name); alias != tool.Name {
			if _, taken := t.tool[alias]; !taken {
				t.tool[alias] = tool.Name
				t.Functions = append(t.Functions, s.compile(at, i, alias, tool))
			}
		}
	}
	return t
}

func (s *Server) compile(at string, i int, name string, tool *mcp.Tool) *typed.Function {
	desc := clip(tool.Description, typed.MaxDescriptionBytes)
	tries := []entry{
		{name, desc, tool.InputSchema, tool.OutputSchema},
		{name, desc, tool.InputSchema, nil},
		{name, desc, nil, nil},
	}
	for k, e := range tries {
		raw, err := json.Marshal(e)
		if err == nil {
			var fn *typed.Function
			if fn, err = typed.Compile(fmt.Sprintf("tools[%d]", i), raw); err == nil {
				return fn
			}
		}
		if k == 0 {
			s.log.Warn("mcp tool schema not usable; the tool is called unchecked", "tool", tool.Name, "err", err, "at", at)
		}
	}
	return &typed.Function{Name: name} // unreachable in practice: a name and description always compile
}

type entry struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Parameters  any    `json:"parameters,omitempty"`
	Returns     any    `json:"returns,omitempty"`
}

// clip cuts s to at most n bytes on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
