package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/internal/mcptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// `coderun-rpc mcp` driven by the official Go SDK's client, with this test
// binary as the upstream server.

// mcpServe starts `coderun-rpc mcp` with one upstream "test-server" and
// connects a client; onProgress receives progress notifications.
func mcpServe(t *testing.T, onProgress func(*sdk.ProgressNotificationParams)) *sdk.ClientSession {
	return mcpServeWith(t, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			if onProgress != nil {
				onProgress(r.Params)
			}
		}})
}

func mcpServeWith(t *testing.T, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return mcpServeEnv(t, opts, nil)
}

// mcpServeEnv is mcpServeWith with env added to the daemon's environment.
func mcpServeEnv(t *testing.T, opts *sdk.ClientOptions, env map[string]string) *sdk.ClientSession {
	t.Helper()
	return mcpServeServers(t, opts, env, map[string]map[string]string{"test-server": mcptest.Env(0, "")})
}

// mcpServeServers is mcpServeEnv with the upstream servers given (key → the
// environment that makes this binary that server); nil servers: no upstream
// file at all.
func mcpServeServers(t *testing.T, opts *sdk.ClientOptions, env map[string]string, servers map[string]map[string]string) *sdk.ClientSession {
	t.Helper()
	args := []string{"mcp"}
	if servers != nil {
		args = append(args, "--mcp-config", mcpConfig(t, servers))
	}
	cmd := exec.Command(daemonBin, args...)
	cmd.Env = environ(t, env)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, stderr)
	}
	t.Cleanup(func() {
		cs.Close()
		if s := stderr.String(); strings.Contains(s, "DATA RACE") || strings.Contains(s, "panic") {
			t.Errorf("the daemon reported a data race or a panic:\n%s", s)
		}
	})
	return cs
}

func runPython(t *testing.T, cs *sdk.ClientSession, args map[string]any, token any) *sdk.CallToolResult {
	t.Helper()
	p := &sdk.CallToolParams{Name: "run_python", Arguments: args}
	if token != nil {
		p.SetProgressToken(token)
	}
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("run_python: %v", err)
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// The tool list carries the upstream's stubs; a run calls the upstream,
// logs arrive as progress, and the result is the run result object.
func TestMCPServeRun(t *testing.T) {
	t.Parallel()
	progress := make(chan string, 64)
	cs := mcpServe(t, func(p *sdk.ProgressNotificationParams) { progress <- p.Message })
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var desc string
	for _, tool := range tools.Tools {
		if tool.Name == "run_python" {
			desc = tool.Description
		}
	}
	for _, want := range []string{"class TestServer:", "async def add(self, a: int, b: int)", "test_server: TestServer"} {
		if !strings.Contains(desc, want) {
			t.Errorf("run_python's description lacks %q:\n%s", want, desc)
		}
	}
	res := runPython(t, cs, map[string]any{"program": "print('working')\nreturn await test_server.add(a=1, b=2)"}, "tok-1")
	if res.IsError || !strings.Contains(text(res), "working") || !strings.Contains(text(res), `value: {"sum":3}`) {
		t.Fatalf("isError %v, text %q", res.IsError, text(res))
	}
	var structured struct {
		Value json.RawMessage            `json:"value"`
		Stats struct{ BindingCalls int } `json:"stats"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if json.Unmarshal(b, &structured) != nil || string(structured.Value) != `{"sum":3}` || structured.Stats.BindingCalls != 1 {
		t.Errorf("structuredContent %s", b)
	}
	// The server notifies before it answers, but the SDK's client may hand
	// a notification to its handler after the call has returned.
	var got []string
	for deadline := time.After(10 * time.Second); !strings.Contains(strings.Join(got, ""), "working"); {
		select {
		case m := <-progress:
			got = append(got, m)
		case <-deadline:
			t.Fatalf("progress messages %q lack the log line", got)
		}
	}
}

// When the upstream's tool list changes, the host is told and the new
// description carries the new tool.
func TestMCPServeListChanged(t *testing.T) {
	t.Parallel()
	changed := make(chan struct{}, 8)
	cs := mcpServeWith(t, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} }})
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the first listing replaced the initial description: let its notice land
	for len(changed) > 0 {
		<-changed
	}
	if res := runPython(t, cs, map[string]any{"program": "return await test_server.grow()"}, nil); res.IsError {
		t.Fatalf("grow: %s", text(res))
	}
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no tools/list_changed after the upstream's list changed")
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "run_python" && !strings.Contains(tool.Description, "async def grown(") {
			t.Errorf("the description lacks the new tool:\n%s", tool.Description)
		}
	}
}

// Files go in like a run's; displayed images come back as MCP image
// content (and every output in structuredContent).
func TestMCPServeFilesAndImages(t *testing.T) {
	t.Parallel()
	cs := mcpServe(t, nil)
	res := runPython(t, cs, map[string]any{
		"program": "class P:\n    def _repr_png_(self):\n        return b'\\x89PNG\\r\\n\\x1a\\n fake'\ndisplay(P())\nreturn open('in/data.txt').read()",
		"files":   []any{map[string]any{"path": "in/data.txt", "text": "hello"}},
	}, nil)
	if res.IsError || !strings.Contains(text(res), `value: "hello"`) {
		t.Fatalf("isError %v, text %q", res.IsError, text(res))
	}
	var img *sdk.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*sdk.ImageContent); ok {
			img = ic
		}
	}
	if img == nil || img.MIMEType != "image/png" || string(img.Data) != "\x89PNG\r\n\x1a\n fake" {
		t.Errorf("image content %+v, want the displayed PNG", img)
	}
	res = runPython(t, cs, map[string]any{"program": "return 1", "files": []any{map[string]any{"path": "../x", "text": ""}}}, nil)
	if !res.IsError || !strings.Contains(text(res), `files[0].path "../x" must not contain a '..' segment`) {
		t.Errorf("isError %v, text %q", res.IsError, text(res))
	}
}

// Failures are isError with the error rendered; bad arguments and closing a
// session that is not open say so.
func TestMCPServeErrors(t *testing.T) {
	t.Parallel()
	cs := mcpServe(t, nil)
	res := runPython(t, cs, map[string]any{"program": "x = 1\nraise ValueError('bad')"}, nil)
	if !res.IsError || !strings.Contains(text(res), "error (exception): Traceback") || !strings.Contains(text(res), "ValueError: bad") || !strings.Contains(text(res), "(line 2)") {
		t.Errorf("isError %v, text %q", res.IsError, text(res))
	}
	res = runPython(t, cs, map[string]any{"program": "return [{'a'}]"}, nil)
	if !res.IsError || !strings.Contains(text(res), "(unsupported type (set)) at $[0]\nhint: a set has no JSON form") {
		t.Errorf("isError %v, text %q", res.IsError, text(res))
	}
	res = runPython(t, cs, map[string]any{"program": "return 1", "limits": map[string]any{"maxWallMs": -1}}, nil)
	if !res.IsError || !strings.Contains(text(res), "limits.maxWallMs must be a positive integer") {
		t.Errorf("isError %v, text %q", res.IsError, text(res))
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "close_python_session", Arguments: map[string]any{"session": "s1"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), `session "s1" is not open`) {
		t.Errorf("close: %v %q", err, text(res))
	}
}

// Garbage from the client gets a parse error and the server serves on; a
// client that goes away mid-run leaves no process behind.
func TestMCPServeGarbageAndDisconnect(t *testing.T) {
	leakcheck.Check(t)
	c := rawMCP(t)
	c.send(`this is not json`)
	if got := c.next(); !strings.Contains(got, `"error"`) {
		t.Errorf("garbage answered %s, want an error", got)
	}
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"program":"await test_server.echo('x')\nimport time\ntime.sleep(60)"}}}`)
	time.Sleep(2 * time.Second) // the run and the upstream are up
	c.hangUp()
}

// rawClient is an MCP client of `coderun-rpc mcp` written by hand, line by
// line, for what the SDK's client does not do: send garbage, or hang up
// with a call in flight.
type rawClient struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
}

func rawMCP(t *testing.T) *rawClient {
	t.Helper()
	cmd := exec.Command(daemonBin, "mcp", "--mcp-config", mcpConfig(t, map[string]map[string]string{"test-server": mcptest.Env(0, "")}))
	cmd.Env = environ(t, nil)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	return &rawClient{t: t, cmd: cmd, in: in, lines: lines}
}

func (c *rawClient) send(s string) { c.in.Write([]byte(s + "\n")) }

// next is the server's next line.
func (c *rawClient) next() string {
	c.t.Helper()
	if !c.lines.Scan() {
		c.t.Fatalf("the server closed its output: %v", c.lines.Err())
	}
	return c.lines.Text()
}

func (c *rawClient) initialize() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if got := c.next(); !strings.Contains(got, `"serverInfo"`) {
		c.t.Fatalf("initialize answered %s", got)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// hangUp closes the server's stdin and waits for it to exit.
func (c *rawClient) hangUp() {
	c.t.Helper()
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-done
		c.t.Fatal("the server did not exit after its client went away")
	}
}
