package e2e

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/internal/mcptest"
)

// MCP servers as bindings in the JSON-RPC daemon (docs/mcp.md): the
// upstream is this test binary re-executed as internal/mcptest's server, a
// real MCP server on the official Go SDK.

// mcpConfig writes an mcpServers file naming this binary as each server
// (key → its environment) and returns its path.
func mcpConfig(t *testing.T, servers map[string]map[string]string) string {
	t.Helper()
	type entry struct {
		Command string            `json:"command"`
		Env     map[string]string `json:"env"`
	}
	file := map[string]map[string]entry{"mcpServers": {}}
	for k, env := range servers {
		file["mcpServers"][k] = entry{os.Args[0], env}
	}
	b, _ := json.Marshal(file)
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const tsBinding = `"bindings":[{"global":"ts","mcp":"test-server"}]`

func mcpDaemon(t *testing.T, env map[string]string) *daemon {
	t.Helper()
	return started(t, map[string]string{"CODERUN_MCP_CONFIG": mcpConfig(t, map[string]map[string]string{"test-server": env})})
}

// Calls reach the upstream, never the host: structured results, a single
// text, the subscript and the identifier form of a dashed name, positional
// arguments in stub order, and a tool's error as McpToolError.
func TestMCPBindingCalls(t *testing.T) {
	t.Parallel()
	d := mcpDaemon(t, mcptest.Env(0, ""))
	r := d.run(prog(`out = [await ts.add(a=1, b=2), await ts["get-sum"](a=2, b=3), await ts.get_sum(3, 4), await ts.echo("hi")]
try:
    await ts.fail()
except McpToolError as e:
    out.append([e.tool, e.server, str(e)])
return out`, tsBinding))
	expectOK(t, r, `[{"sum":3},{"sum":5},{"sum":7},"hi",["fail","test-server","fail: it failed on purpose"]]`)
	if r.Stats.BindingCalls != 5 {
		t.Errorf("bindingCalls %d, want 5", r.Stats.BindingCalls)
	}
	for _, e := range d.snapshot() {
		if e.m.Method == "binding/call" {
			t.Fatalf("the host was asked: %s", e.m.Params)
		}
	}
	// Two mcp bindings share one McpToolError class.
	r = d.run(prog(`try:
    await b.fail()
except McpToolError as e:
    return [e.tool, McpToolError.__name__]`, `"bindings":[{"global":"a","mcp":"test-server"},{"global":"b","mcp":"test-server"}]`))
	expectOK(t, r, `["fail","McpToolError"]`)
}

// A stdio server's structuredContent is judged as sent: 2^53 + 1 is refused
// like any lossy answer, not rounded. A tool that asks the client for input
// first (a multi-round-trip result) is answered and retried.
func TestMCPResultsAsSentAndInputAsked(t *testing.T) {
	t.Parallel()
	d := mcpDaemon(t, mcptest.Env(0, ""))
	r := d.run(prog(`try:
    await ts.exact()
except McpToolError as e:
    refused = str(e)
return [refused, await ts.roots()]`, tsBinding))
	expectOK(t, r, `["binding resolution must be lossless JSON","0 roots"]`)
}

// Arguments are checked against the tool's inputSchema before the call.
func TestMCPArgumentsChecked(t *testing.T) {
	t.Parallel()
	d := mcpDaemon(t, mcptest.Env(0, ""))
	r := d.run(prog(`try:
    await ts.add(a="1", b=2)
except TypeError as e:
    return str(e)`, tsBinding))
	expectOK(t, r, `"ts.add(): invalid arguments: /a: expected integer, but got string"`)
}

// bindings/describe renders the server's tools; bad mcp bindings are −32602
// naming the binding.
func TestMCPDescribeAndRefusals(t *testing.T) {
	t.Parallel()
	d := mcpDaemon(t, mcptest.Env(0, ""))
	m := d.call("bindings/describe", `{`+tsBinding+`}`)
	var res struct{ Stubs string }
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
		t.Fatalf("describe: %+v %s", m.Error, m.Result)
	}
	for _, want := range []string{"class Ts:", "async def add(self, a: int, b: int)", "async def get_sum(", "Echo a message back.", "ts: Ts"} {
		if !strings.Contains(res.Stubs, want) {
			t.Errorf("stubs lack %q:\n%s", want, res.Stubs)
		}
	}
	for params, want := range map[string]string{
		`"bindings":[{"global":"x","mcp":"nope"}]`:                       `bindings[0].mcp "nope" is not a configured MCP server`,
		`"bindings":[{"global":"x","mcp":"test-server","functions":[]}]`: `bindings[0] has both "mcp" and "functions"`,
		`"bindings":[{"global":"x","mcp":5}]`:                            `bindings[0].mcp must be the name of a configured MCP server`,
		`"bindings":[{"global":"McpToolError","mcp":"test-server"}]`:     `bindings[0].global "McpToolError" is the name of the error class MCP bindings share`,
	} {
		m := d.call("run", prog("return 1", params))
		if m.Error == nil || m.Error.Code != -32602 || !strings.HasPrefix(m.Error.Message, want) {
			t.Errorf("%s: got %+v, want −32602 %q", params, m.Error, want)
		}
	}
}

// A hanging tool is ended by the run's wall clock, and the call is
// cancelled upstream (the server's handler sees it).
func TestMCPHangEndsWithTheWallClock(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "cancelled")
	d := mcpDaemon(t, mcptest.Env(0, mark))
	d.run(prog(`return 1`, tsBinding)) // the server is up: the next run's clock is the call's
	r := d.run(prog(`return await ts.hang()`, tsBinding, `"limits":{"maxWallMs":1500}`))
	if r.Error == nil || r.Error.Kind != "timeout" || r.Error.Budget != "wall" {
		t.Fatalf("got %+v, want a wall timeout", r.Error)
	}
	waitCancelled(t, mark)
}

// waitCancelled waits for the hang tool's mark: its call was cancelled
// upstream.
func waitCancelled(t *testing.T, mark string) {
	t.Helper()
	waitFor(t, func() bool { _, err := os.Stat(mark); return err == nil }, "the upstream call to be cancelled")
}

// A call that keeps the goroutine that read it busy (docs/performance.md
// §12) does not hold up the child's other frames: while a hanging call runs,
// other calls are made and answered, and a program that leaves it running and
// returns is settled by its done frame, well within its wall clock; the call
// is cancelled upstream.
func TestMCPSlowCallLeavesFramesFlowing(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "cancelled")
	d := mcpDaemon(t, mcptest.Env(0, mark))
	d.run(prog(`return 1`, tsBinding)) // the server is up
	r := d.run(prog(`import asyncio
task = asyncio.ensure_future(ts.hang())
await asyncio.sleep(0.2)
out = [await ts.echo("one"), await ts.add(a=1, b=2)]
print("the call is still running:", not task.done())
return out`, tsBinding, `"limits":{"maxWallMs":10000}`))
	expectOK(t, r, `["one",{"sum":3}]`)
	if len(r.Logs) != 1 || r.Logs[0] != "the call is still running: True" {
		t.Errorf("logs %q", r.Logs)
	}
	waitCancelled(t, mark)
}

// A server that exits mid-call fails that call naming the server; the next
// call starts it afresh. One that cannot start fails the run naming it, and
// the daemon serves on.
func TestMCPServerFaults(t *testing.T) {
	t.Parallel()
	path := mcpConfig(t, map[string]map[string]string{"test-server": mcptest.Env(0, ""), "broken": mcptest.FailStartEnv()})
	d := started(t, map[string]string{"CODERUN_MCP_CONFIG": path})
	r := d.run(prog(`try:
    await ts.exit()
except McpToolError as e:
    first = str(e)
return [first.startswith('mcp server "test-server": tool "exit"'), await ts.echo("back")]`, tsBinding))
	expectOK(t, r, `[true,"back"]`)
	r = d.run(prog(`return 1`, `"bindings":[{"global":"br","mcp":"broken"}]`))
	if r.Error == nil || !strings.HasPrefix(r.Error.Message, `mcp server "broken": cannot start`) {
		t.Fatalf("got %+v, want an error naming the server", r.Error)
	}
	expectOK(t, d.run(prog(`return await ts.echo("still serving")`, tsBinding)), `"still serving"`)
}

// 500 tools are listed and callable.
func TestMCPManyTools(t *testing.T) {
	t.Parallel()
	d := mcpDaemon(t, mcptest.Env(500, ""))
	expectOK(t, d.run(prog(`return [len([n for n in dir(ts) if n[0] == "t" and n[1:].isdigit()]), await ts.t499("last")]`, tsBinding)), `[500,"last"]`)
}

// A configuration file that is missing, malformed or names one global twice
// stops the daemon at start, exit 2, with a message naming the problem.
func TestMCPConfigRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o600)
		return p
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.json"):                                                "CODERUN_MCP_CONFIG=",
		write("bad.json", `{"mcpServers":`):                                               "not valid JSON",
		write("dup.json", `{"mcpServers":{"a-b":{"command":"x"},"a_b":{"command":"y"}}}`): `both become the global "a_b"`,
	} {
		cmd := exec.Command(daemonBin)
		cmd.Env = environ(t, map[string]string{"CODERUN_MCP_CONFIG": path})
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), want) {
			t.Errorf("%s: exit %v, output %q; want exit 2 and %q", path, err, out, want)
		}
	}
}

// When the daemon exits, no upstream server is left behind.
func TestMCPNoOrphanServer(t *testing.T) {
	leakcheck.Check(t)
	d := mcpDaemon(t, mcptest.Env(0, ""))
	expectOK(t, d.run(prog(`return await ts.echo("up")`, tsBinding)), `"up"`)
	d.stdin.Close()
	<-d.exited
}

// A ${VAR} in an upstream's URL stays a reference in everything that leaves
// the daemon: an HTTP upstream on a closed loopback port with its key in the
// URL fails a run and bindings/describe, and neither they nor the log show
// the key.
func TestMCPUpstreamSecretsStayHidden(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	const key = "s3cr3t-e2e-key"
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers":{"web":{"url":"http://`+closed+`/mcp?api_key=${E2E_KEY}"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := started(t, map[string]string{"CODERUN_MCP_CONFIG": cfg, "E2E_KEY": key, "CODERUN_LOG_LEVEL": "debug"})
	binding := `"bindings":[{"global":"web","mcp":"web"}]`
	seen := []string{string(d.call("run", prog("return 1", binding)).raw), string(d.call("bindings/describe", `{`+binding+`}`).raw)}
	if !strings.Contains(seen[0]+seen[1], "${E2E_KEY}") {
		t.Errorf("the failures do not name the upstream's URL as configured:\n%s", strings.Join(seen, "\n"))
	}
	for _, s := range append(seen, d.stderr.String()) {
		if strings.Contains(s, key) {
			t.Errorf("the key left the daemon: %.400s", s)
		}
	}
}

// An upstream tool whose inputSchema can make the argument check exponential
// (internal/mcptest's nested): the call is refused as too costly within the
// run's wall clock, the check does not go on after the run, and the tool
// still takes ordinary values.
func TestMCPC621CheckTooCostlyRefused(t *testing.T) {
	leakcheck.Check(t)
	d := mcpDaemon(t, mcptest.Env(0, ""))
	expectBombRefused(t, d, "ts", "nested", tsBinding)
	expectOK(t, d.run(prog(`return await ts.nested(x=[["a"], []])`, tsBinding)), `"nested"`)
}
