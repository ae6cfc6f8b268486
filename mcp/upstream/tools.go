package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/coderun-rpc/coderun-rpc/typed"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tools is a server's tool list as typed binding functions: one per tool, in
// the server's order, plus, for a tool whose name is not an identifier, one
// under its identifier form when that collides with nothing (docs/mcp.md: reachable
// as everything["get-sum"] and everything.get_sum). Immutable.
type Tools struct {
	Functions []*typed.Function
	// Cut says which tools a cap left out (docs/mcp.md §2.5), naming the
	// server and the cap: "" when none.
	Cut  string
	tool map[string]string // function name → the tool it calls
}

// Tool is the upstream tool a call of function calls: the one it names,
// else function itself (for the server to refuse when it has no such tool).
func (t *Tools) Tool(function string) string {
	if tool := t.tool[function]; tool != "" {
		return tool
	}
	return function
}

// Tools is the server's tool list: the cached list at once (one older than
// Caps.ToolsTTL, or one the server said changed, is listed again in the
// background meanwhile), else the listing in flight, waited for until it
// ends or ctx does. A listing runs on its own clock (Caps.ListTimeout), never
// the caller's: a run waits for it at most that long and never starts one
// over.
func (s *Server) Tools(ctx context.Context) (*Tools, error) {
	s.mu.Lock()
	t := s.tools
	var l *listing
	if t == nil || s.stale || time.Since(s.listedAt) >= s.caps.ToolsTTL {
		l = s.listLocked()
	}
	s.mu.Unlock()
	if t != nil {
		return t, nil
	}
	select {
	case <-l.done:
		return l.tools, l.err
	case <-ctx.Done():
		return nil, s.fail(fmt.Errorf("not ready before the run's deadline: %w", context.Cause(ctx)))
	}
}

// listing is one tools/list of the server, shared by everyone waiting for
// it; tools and err are set before done closes.
type listing struct {
	done  chan struct{}
	tools *Tools
	err   error
}

// listLocked returns the listing in flight, starting one when there is
// none; once the server is closed, one that failed. s.mu is held.
func (s *Server) listLocked() *listing {
	switch {
	case s.closed:
		l := &listing{done: make(chan struct{}), err: s.fail(errors.New("the daemon is shutting down"))}
		close(l.done)
		return l
	case s.listing == nil:
		l := &listing{done: make(chan struct{})}
		s.listing = l
		s.lists.Go(func() { s.list(l) })
	}
	return s.listing
}

// list connects when needed and lists the tools within Caps.ListTimeout,
// then caches the list. A list that replaces an earlier one is announced
// with onChange.
func (s *Server) list(l *listing) {
	ctx, cancel := context.WithTimeout(s.life, s.caps.ListTimeout)
	defer cancel()
	cs, err := s.session(ctx)
	if err == nil {
		l.tools, err = s.listOn(ctx, cs)
	}
	l.err = err
	s.mu.Lock()
	s.listing = nil
	replaced := false
	if err == nil && s.sess == cs {
		replaced = s.tools != nil
		s.tools, s.listedAt, s.stale = l.tools, time.Now(), false
	}
	s.mu.Unlock()
	close(l.done)
	if replaced && s.onChange != nil {
		s.onChange()
	}
}

// Names of the settings behind Caps, as messages name them (config/table.go).
const (
	varMaxPages     = "CODERUN_MCP_MAX_PAGES"
	varMaxTools     = "CODERUN_MCP_MAX_TOOLS"
	varMaxStubBytes = "CODERUN_MCP_MAX_STUB_BYTES"
	varListMs       = "CODERUN_MCP_LIST_MS"
)

// listOn reads tools/list pages on cs until the last one or a cap: pages,
// tools, stub bytes, the listing's time. The tools kept are converted, and
// Tools.Cut says what a cap left out. Only a listing that kept nothing fails.
func (s *Server) listOn(ctx context.Context, cs *link) (*Tools, error) {
	var kept []*mcp.Tool
	var stub int64
	cut := ""
	cursor := ""
	for page := 0; cut == "" && (page == 0 || cursor != ""); page++ {
		if page == s.caps.MaxPages {
			cut = fmt.Sprintf("tools omitted: those after page %d (cap %s=%d)", page, varMaxPages, s.caps.MaxPages)
			break
		}
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		var wire *jsonrpc.Error
		switch {
		case err != nil && ctx.Err() != nil && len(kept) > 0:
			cut = fmt.Sprintf("tools omitted: those after page %d (cap %s=%d)", page, varListMs, s.caps.ListTimeout.Milliseconds())
		case errors.As(err, &wire) && wire.Code == codePageTooLong && len(kept) > 0:
			cut = fmt.Sprintf("tools omitted: those from page %d on (%s)", page+1, wire.Message)
		}
		if cut != "" {
			break
		}
		if err != nil {
			return nil, s.fail(fmt.Errorf("listing tools: %w", err))
		}
		cursor = res.NextCursor
		for i, tool := range res.Tools {
			size := stubBytes(tool)
			switch {
			case len(kept) == s.caps.MaxTools:
				cut = omitted(len(res.Tools)-i, cursor != "", varMaxTools, int64(s.caps.MaxTools))
			case stub+size > s.caps.MaxStubBytes:
				cut = omitted(len(res.Tools)-i, cursor != "", varMaxStubBytes, s.caps.MaxStubBytes)
			}
			if cut != "" {
				break
			}
			kept = append(kept, tool)
			stub += size
		}
	}
	t := s.convert(kept)
	if cut != "" {
		t.Cut = fmt.Sprintf("mcp server %q: %s", s.spec.Key, cut)
		s.log.Warn("mcp tools cut", "cut", cut)
	}
	return t, nil
}

// omitted says n tools were left out by the cap name=limit, and maybe the
// tools of pages not read.
func omitted(n int, more bool, name string, limit int64) string {
	plus := ""
	if more {
		plus = " and those on later pages"
	}
	return fmt.Sprintf("tools omitted: %d%s (cap %s=%d)", n, plus, name, limit)
}

// stubBytes is what a tool adds to the stubs, as the cap counts it: its
// name, its description as cut for the docstring, and its schemas' text.
func stubBytes(tool *mcp.Tool) int64 {
	n := len(tool.Name) + min(len(tool.Description), typed.MaxDescriptionBytes)
	for _, schema := range []any{tool.InputSchema, tool.OutputSchema} {
		if schema != nil {
			b, _ := json.Marshal(schema)
			n += len(b)
		}
	}
	return int64(n)
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
