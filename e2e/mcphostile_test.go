package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/mcptest"
	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
)

// A hostile upstream MCP server (internal/mcptest's hostile.go) against the
// daemon's bounds (docs/mcp.md §2.5): it may cost a run its own budgets,
// never the daemon its memory or other runs their time.

const hostileBinding = `"bindings":[{"global":"h","mcp":"hostile"}]`

// hostileDaemon is the JSON-RPC daemon with the hostile server in mode.
func hostileDaemon(t *testing.T, mode string, env map[string]string) *daemon {
	t.Helper()
	if env == nil {
		env = map[string]string{}
	}
	env["CODERUN_MCP_CONFIG"] = mcpConfig(t, map[string]map[string]string{"hostile": mcptest.HostileEnv(mode)})
	return started(t, env)
}

// peakMB is the daemon's peak resident memory (VmHWM) in MiB.
func (d *daemon) peakMB() int {
	mb := statusKB(d.cmd.Process.Pid, "VmHWM") >> 10
	d.t.Logf("the daemon's peak RSS: %d MiB", mb)
	return mb
}

// daemonPeakMB bounds the daemon's peak RSS in these tests: a few times its
// idle size plus one result of the default upstream budget (16 MiB), far
// below what the unbounded daemon reached (hundreds of MiB to GiB). A daemon
// built with -race (raceEnabled) holds its shadow memory too: 2.5 times as
// much, still below the unbounded daemon's peaks.
var daemonPeakMB = map[bool]int{false: 160, true: 400}[raceEnabled]

// A tools/list whose every page names another nextCursor is cut at
// CODERUN_MCP_MAX_PAGES: the run binds what was listed and completes, and the
// daemon's memory stays bounded.
func TestMCPHostileEndlessCursor(t *testing.T) {
	t.Parallel()
	d := hostileDaemon(t, mcptest.HostileCursor, nil)
	for range 2 { // the second run takes the cached list
		r := d.run(prog(`return [len([n for n in dir(h) if n[0] == "h"]) > 0, await h.echo("up")]`, hostileBinding, `"limits":{"maxWallMs":20000}`))
		expectOK(t, r, `[true,"up"]`)
	}
	if mb := d.peakMB(); mb > daemonPeakMB {
		t.Errorf("the daemon's peak RSS is %d MiB, want at most %d", mb, daemonPeakMB)
	}
}

// A 60 MB tool result is refused past the run's upstream budget
// (limits.maxUpstreamBytes) without being held whole: the call raises
// McpToolError naming the budget, the connection serves on, and the daemon's
// peak RSS stays far below the result's size. Eight such calls at once too.
func TestMCPHostileBigResult(t *testing.T) {
	t.Parallel()
	d := hostileDaemon(t, mcptest.HostileBig, nil)
	const call = `try:
    await h.big(mb=60)
except McpToolError as e:
    return str(e)
return "accepted"`
	r := d.run(prog(call, hostileBinding, `"limits":{"maxWallMs":120000}`))
	if r.Error != nil || !strings.Contains(string(r.Value), "limits.maxUpstreamBytes") {
		t.Fatalf("value %s error %+v; want McpToolError naming limits.maxUpstreamBytes", r.Value, r.Error)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r := d.run(prog(call, hostileBinding, `"limits":{"maxWallMs":120000}`))
			if r.Error != nil || !strings.Contains(string(r.Value), "limits.maxUpstreamBytes") {
				t.Errorf("value %s error %+v; want McpToolError naming limits.maxUpstreamBytes", r.Value, r.Error)
			}
		})
	}
	wg.Wait()
	expectOK(t, d.run(prog(`return await h.echo("still serving")`, hostileBinding)), `"still serving"`)
	if mb := d.peakMB(); mb > daemonPeakMB {
		t.Errorf("the daemon's peak RSS is %d MiB, want at most %d", mb, daemonPeakMB)
	}
}

// The budget is the run's, across its calls, and a run may only tighten it:
// three results of 1 MiB fit 3.5 MiB, the fourth is refused and the run
// goes on; a budget above the daemon's is refused (−32602).
func TestMCPHostileBudgetPerRun(t *testing.T) {
	t.Parallel()
	d := hostileDaemon(t, mcptest.HostileBig, nil)
	r := d.run(prog(`got = []
for i in range(4):
    try:
        got.append(len(await h.big(mb=1)))
    except McpToolError as e:
        got.append("maxUpstreamBytes=3670016" in str(e))
return got`, hostileBinding, `"limits":{"maxUpstreamBytes":3670016}`))
	expectOK(t, r, `[1048576,1048576,1048576,true]`)
	m := d.call("run", prog("return 1", `"limits":{"maxUpstreamBytes":1e12}`))
	if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "limits.maxUpstreamBytes must not exceed") {
		t.Errorf("got %+v, want −32602 refusing limits.maxUpstreamBytes", m.Error)
	}
}

// 3 000 tools of 16 KiB are cut to CODERUN_MCP_MAX_STUB_BYTES: run_python's
// description stays bounded and says what was cut.
func TestMCPServeHostileTools(t *testing.T) {
	t.Parallel()
	cs := mcpServeServers(t, nil, nil, map[string]map[string]string{"hostile": mcptest.HostileEnv(mcptest.HostileTools)})
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != "run_python" {
			continue
		}
		if n := len(tool.Description); n > 1<<20 || !strings.Contains(tool.Description, "tools omitted:") {
			t.Errorf("run_python's description is %d bytes (want at most 1 MiB) and says %q", n, lastLines(tool.Description, 3))
		}
	}
	res := runPython(t, cs, map[string]any{"program": `return await hostile.echo("up")`}, nil)
	if res.IsError || !strings.Contains(text(res), `value: "up"`) {
		t.Fatalf("isError %v, text %q", res.IsError, text(res))
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// A tools/list page of 9 MB of schema (which a JSON decoder would make
// hundreds of MiB) is read past at 4 × CODERUN_MCP_MAX_STUB_BYTES: the tools
// of the first page stay callable, the cut is said, the daemon's memory
// stays bounded.
func TestMCPHostileFatPage(t *testing.T) {
	t.Parallel()
	d := hostileDaemon(t, mcptest.HostileFatPage, nil)
	m := d.call("bindings/describe", `{`+hostileBinding+`}`)
	if m.Error != nil || !strings.Contains(string(m.Result), "tools omitted: those from page 2 on (a tools/list page exceeds") {
		t.Errorf("describe: %+v %.300s", m.Error, lastLines(string(m.Result), 2))
	}
	expectOK(t, d.run(prog(`return await h.echo("up")`, hostileBinding)), `"up"`)
	if mb := d.peakMB(); mb > daemonPeakMB {
		t.Errorf("the daemon's peak RSS is %d MiB, want at most %d", mb, daemonPeakMB)
	}
}

// An upstream's failure of any size reaches the program and the daemon's log
// cut to MaxErrorMessageBytes with the truncation marker: a JSON-RPC error
// and an isError result of 3 MiB each.
func TestMCPHostileBigErrors(t *testing.T) {
	t.Parallel()
	d := hostileDaemon(t, mcptest.HostileBig, nil)
	r := d.run(prog(`out = []
for f in (h.fail, h.toolfail):
    try:
        await f(mb=3)
    except McpToolError as e:
        out.append([len(str(e).encode()), str(e).endswith("[truncated]")])
return out`, hostileBinding, `"limits":{"maxWallMs":60000}`))
	var got [][2]any
	if r.Error != nil || json.Unmarshal(r.Value, &got) != nil || len(got) != 2 {
		t.Fatalf("value %s error %+v", r.Value, r.Error)
	}
	for i, g := range got {
		if n, _ := g[0].(float64); n > upstream.MaxErrorMessageBytes || n < upstream.MaxErrorMessageBytes/2 || g[1] != true {
			t.Errorf("failure %d reached the program as %v bytes, truncated %v; want at most %d, marked", i, g[0], g[1], upstream.MaxErrorMessageBytes)
		}
	}
	for _, line := range strings.Split(d.stderr.String(), "\n") {
		if len(line) > 2*upstream.MaxErrorMessageBytes {
			t.Errorf("a log line of %d bytes: %.120s…", len(line), line)
		}
	}
}
