package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wire"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// runIntro opens run_python's description, whatever a program can call.
const runIntro = `Run a Python program in a fresh CPython process under budgets and return its logs and value.
A top-level return gives the run's value; print() output is logged. With "session": "<name>",
runs share one interpreter: variables, imports and files stay for the next call with that name.
`

// noServers ends the description of a daemon without upstream servers; its
// example is a whole program that runs.
const noServers = `No MCP server is configured: there are no host tools, and a program has what the Python
interpreter provides (its standard library and installed packages). For example:
    import statistics
    return statistics.median([3, 1, 2])
`

// noneReached precedes the notes saying why each configured server is left out.
const noneReached = `No configured MCP server could be reached: there are no host tools for now, and the next call
tries the servers again. Why:
`

// describe is run_python's description: the intro and what packages a call
// may name (wire.PackagesNote), then the stubs of the upstream servers
// reached (nss) followed by a note per server left out or cut, or, when
// there is nothing to call, that there is not and why. The budgets and the
// egress policy are said in every case.
func (s *Server) describe(nss []protocol.Namespace, notes string) string {
	limits, python, policy := s.opts.Limits, s.opts.PythonVersion, s.opts.Egress
	intro := runIntro + wire.PackagesNote(nil, s.opts.Packages)
	budgets := wire.Budgets(limits) + " Python " + python + ".\n" + wire.EgressLine(policy)
	switch {
	case !s.configured():
		return intro + budgets + noServers
	case len(nss) == 0:
		return intro + budgets + noneReached + strings.TrimPrefix(notes, "\n") + "\n"
	}
	return intro + toolsIntro(nss) + "The API:\n\n" + wire.WithEgressLine(wire.Stubs(limits, python, nss), policy) + notes
}

// toolsIntro says how a program calls the servers' tools, with examples
// that name real ones.
func toolsIntro(nss []protocol.Namespace) string {
	b := "Every tool of the MCP servers below is an async method of a global named after its server:\n" +
		"call it with await and the arguments its stub declares"
	if global, name, ok := firstTool(nss, wire.IsStubMethod); ok {
		b += " (for example: r = await " + global + "." + name + "(...))"
	}
	b += ".\n"
	if global, name, ok := firstTool(nss, subscriptExample); ok {
		b += "A tool whose name is not an identifier is also reached by subscript: " + global + `["` + name + `"](...).` + "\n"
	}
	return b + "A failing tool raises McpToolError (.tool and .server name the tool and its server).\n"
}

// firstTool is the first tool of nss whose name passes keep, with its
// server's global.
func firstTool(nss []protocol.Namespace, keep func(string) bool) (global, name string, ok bool) {
	for _, ns := range nss {
		for _, n := range ns.Names {
			if keep(n) {
				return ns.Global, n, true
			}
		}
	}
	return "", "", false
}

// subscriptExample: a name with a character no identifier holds (get-sum)
// that reads the same inside a Python string literal as it is (printable
// ASCII, no quote, no backslash), so an upstream's name cannot break the
// description's text.
func subscriptExample(name string) bool {
	odd := false
	for _, c := range []byte(name) {
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
		odd = odd || !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
	}
	return odd
}

var runSchema = json.RawMessage(`{"type":"object","properties":{
"program":{"type":"string","description":"the Python program"},
"session":{"type":"string","pattern":"^[A-Za-z0-9_.:-]{1,64}$","description":"run in the named persistent Python session: the first call with a name opens it, later calls with the name see the globals, imports and files earlier ones left; close it with close_python_session"},
"files":{"type":"array","description":"files to place in the run's directory"},
"limits":{"type":"object","description":"budgets that tighten the daemon's: cpuSeconds, maxWallMs, addressSpaceMb, maxLogBytes, maxValueBytes, maxUpstreamBytes"},
"packages":{"type":"array","items":{"type":"string"},"description":"packages to install before the program runs, e.g. [\"requests\", \"scipy==1.14.1\"], among those the daemon allows; with session, given by the call that opens it"}},
"required":["program"]}`)

func runTool(desc string) *sdk.Tool {
	return &sdk.Tool{Name: "run_python", Description: desc, InputSchema: runSchema}
}

var closeTool = &sdk.Tool{Name: "close_python_session",
	Description: "Close a named Python session opened by run_python: its process and its variables are gone.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"session":{"type":"string"}},"required":["session"]}`)}

// runInput is run_python's arguments.
type runInput struct {
	Program  *string         `json:"program"`
	Session  *string         `json:"session"`
	Files    json.RawMessage `json:"files"`
	Limits   json.RawMessage `json:"limits"`
	Packages json.RawMessage `json:"packages"`
}

func toolError(format string, a ...any) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, a...)}}}
}

// runPython runs one program, in the named session when "session" is given;
// the client cancelling the call (or going away) cancels the run.
func (s *Server) runPython(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in runInput
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
		return toolError("run_python: arguments must be an object: %v", err), nil
	}
	if in.Program == nil {
		return toolError("run_python: program is required (a string)"), nil
	}
	raw, _ := json.Marshal(map[string]any{"program": *in.Program, "limits": in.Limits, "files": in.Files, "packages": in.Packages})
	p, err := wire.ValidateRun(raw, s.opts.Limits, s.opts.Packages)
	if err != nil {
		return toolError("run_python: %v", err), nil
	}
	var opened bool
	if in.Session != nil {
		if err := validName(*in.Session); err != nil {
			return toolError("run_python: %v", err), nil
		}
		if p.SessionID, opened, err = s.sessionFor(req.Session, *in.Session, p.Limits, p.Packages); err != nil {
			return toolError("run_python: %v", err), nil
		}
		p.Limits.AddressSpaceMb, p.Packages = 0, nil // the session's, fixed when it opened
	}
	wall := time.Duration(session.EffectiveLimits(s.opts.Limits, p.Limits).MaxWallMs) * time.Millisecond
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, wall)
	nss, routes, notes := s.resolve(rctx)
	cancel()
	p.Bindings = nss
	p.Limits.MaxWallMs = max(1, (wall - time.Since(start)).Milliseconds())
	p.Stream = req.Params.GetProgressToken() != nil // log lines as progress notifications
	r, err := s.execute(ctx, req, p, routes)
	if in.Session == nil {
		return render(r, notes), nil
	}
	return s.renderNamed(req.Session, *in.Session, p.SessionID, opened, r, err, notes), nil
}

// renderNamed is the result of a run in a named session: the run's, with a
// first line when the call opened the session and a last one when the
// session ended (the name is then forgotten, so the next call opens a fresh
// one); a session that had ended before the call is an error saying so.
func (s *Server) renderNamed(ss *sdk.ServerSession, name, id string, opened bool, r protocol.Result, err error, notes string) *sdk.CallToolResult {
	if err != nil {
		s.forget(ss, name, id)
		return toolError("run_python: %v", endedError(name, err))
	}
	if opened {
		notes = "\n# opened session " + strconv.Quote(name) + notes
	}
	res := render(r, notes)
	if r.Session != nil && !r.Session.Alive {
		s.forget(ss, name, id)
		tc := res.Content[0].(*sdk.TextContent)
		tc.Text += "\n" + lostText(name, session.StateLost, r.Session.Reason)
		res.IsError = true
	}
	return res
}

// execute submits p and waits for its result; a session run refused at
// submission (its session ended) is the error.
func (s *Server) execute(ctx context.Context, req *sdk.CallToolRequest, p protocol.RunParams, routes map[string]*upstream.Server) (protocol.Result, error) {
	s.mu.Lock()
	s.seq++
	id := strconv.Quote("mcp-" + strconv.FormatUint(s.seq, 10))
	s.mu.Unlock()
	done := make(chan protocol.Result, 1)
	budget := session.EffectiveLimits(s.opts.Limits, p.Limits).MaxUpstreamBytes
	c := upstream.Client(&progress{ctx: ctx, req: req}, routes, budget)
	run, err := s.opts.Manager.Submit(id, p, c, func(r protocol.Result) { done <- r })
	var se *session.SessionError
	switch {
	case errors.As(err, &se):
		return protocol.Result{}, err
	case err != nil:
		return protocol.Result{Logs: []string{}, Error: &protocol.RunError{Kind: protocol.KindAbort, Message: err.Error()}}, nil
	}
	select {
	case r := <-done:
		return r, nil
	case <-ctx.Done():
		run.Cancel()
		return <-done, nil
	}
}

// progress is the session.Client of a run: log lines become progress
// notifications when the call carried a progress token; every binding is an
// upstream tool (upstream.Client routes them), so none reaches it.
type progress struct {
	ctx context.Context
	req *sdk.CallToolRequest
}

func (p *progress) CallBinding(_, namespace, function string, _ []byte, answer func(session.Answer)) func() {
	msg := "no binding " + namespace + "." + function
	go answer(session.Answer{HasError: true, Message: &msg})
	return func() {}
}

func (p *progress) Log(_ string, ev protocol.LogEvent) {
	token := p.req.Params.GetProgressToken()
	if token == nil {
		return
	}
	_ = p.req.Session.NotifyProgress(p.ctx, &sdk.ProgressNotificationParams{
		ProgressToken: token, Message: ev.Text, Progress: float64(ev.Index + 1)})
}

func (p *progress) Flush() {}

// closeSession answers close_python_session: the name's session is closed
// and its process gone when the result arrives.
func (s *Server) closeSession(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in struct {
		Session *string `json:"session"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.Session == nil {
		return toolError("close_python_session: session is required (a string)"), nil
	}
	if err := s.closeNamed(req.Session, *in.Session); err != nil {
		return toolError("close_python_session: %v", err), nil
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "closed session " + strconv.Quote(*in.Session)}}}, nil
}

// render is a run's tool result: structuredContent is the run result object,
// the text is what a model reads (logs, then the value or the error).
func render(r protocol.Result, notes string) *sdk.CallToolResult {
	var b strings.Builder
	if notes != "" {
		b.WriteString(strings.TrimPrefix(strings.ReplaceAll(notes, "\n# ", "\n"), "\n") + "\n")
	}
	for _, l := range r.Logs {
		b.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			b.WriteByte('\n')
		}
	}
	switch {
	case r.Error != nil:
		b.WriteString("error (" + r.Error.Kind + "): " + r.Error.Message)
		if r.Error.Line != nil {
			fmt.Fprintf(&b, " (line %d)", *r.Error.Line)
		}
		if r.Error.Path != nil {
			b.WriteString(" at " + *r.Error.Path)
		}
		if r.Error.Hint != nil {
			b.WriteString("\nhint: " + *r.Error.Hint)
		}
	case r.Value != nil:
		b.WriteString("value: " + string(r.Value))
	default:
		b.WriteString("(no value)")
	}
	return &sdk.CallToolResult{
		IsError:           r.Error != nil,
		Content:           append([]sdk.Content{&sdk.TextContent{Text: b.String()}}, images(r.Outputs)...),
		StructuredContent: json.RawMessage(wire.RunResultJSON(r)),
	}
}

// images are the displayed images of a run (display(), matplotlib figures)
// as MCP image content, in display order (per output, the first raster type
// that protocol.ImageProblem accepts); every output, whatever its type, is also in
// structuredContent.
func images(outputs []protocol.Output) []sdk.Content {
	var out []sdk.Content
	for _, o := range outputs {
		var data map[string]json.RawMessage
		if json.Unmarshal(o.Data, &data) != nil {
			continue
		}
		for _, mime := range []string{"image/png", "image/jpeg", "image/gif", "image/webp"} {
			var b64 string
			if json.Unmarshal(data[mime], &b64) != nil {
				continue
			}
			// the daemon dropped the images protocol.ImageProblem refuses; checked again
			// here, where they become image content, at the cost of reading a header
			if raw, err := base64.StdEncoding.DecodeString(b64); err == nil && protocol.ImageProblem(mime, raw) == "" {
				out = append(out, &sdk.ImageContent{Data: raw, MIMEType: mime})
				break
			}
		}
	}
	return out
}
