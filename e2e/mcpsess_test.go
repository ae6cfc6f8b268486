package e2e

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Named sessions of `coderun-rpc mcp` (docs/mcp.md §1.4), driven by the Go
// SDK's client.

func closePython(t *testing.T, cs *sdk.ClientSession, name string) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "close_python_session", Arguments: map[string]any{"session": name}})
	if err != nil {
		t.Fatalf("close_python_session: %v", err)
	}
	return res
}

// wantText fails unless res's isError is isErr and its text has every want.
func wantText(t *testing.T, what string, res *sdk.CallToolResult, isErr bool, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text(res), w) {
			t.Errorf("%s: text %q lacks %q", what, text(res), w)
		}
	}
	if res.IsError != isErr {
		t.Errorf("%s: isError %v, want %v; text %q", what, res.IsError, isErr, text(res))
	}
}

// A name's first call opens the session, the next sees its globals and
// files (and calls the upstream from it); another name is another
// interpreter; close ends it and a later call with the name starts afresh.
//
// Catalogue C600, C601.
func TestMCPSessionStateAndClose(t *testing.T) {
	t.Parallel()
	cs := mcpServe(t, nil)
	res := runPython(t, cs, map[string]any{"session": "a", "program": "x = 41\nreturn open('in/n.txt').read()",
		"files": []any{map[string]any{"path": "in/n.txt", "text": "kept"}}}, nil)
	wantText(t, "open", res, false, `opened session "a"`, `value: "kept"`)
	res = runPython(t, cs, map[string]any{"session": "a", "program": "x += (await test_server.add(a=0, b=1))['sum']\nreturn [x, open('in/n.txt').read()]"}, nil)
	wantText(t, "second", res, false, `value: [42,"kept"]`)
	if strings.Contains(text(res), "opened") {
		t.Errorf("the second call says it opened a session: %q", text(res))
	}
	res = runPython(t, cs, map[string]any{"session": "b", "program": "return 'x' in globals()"}, nil)
	wantText(t, "other name", res, false, `opened session "b"`, "value: false")
	res = runPython(t, cs, map[string]any{"program": "return 'x' in globals()"}, nil)
	wantText(t, "no session", res, false, "value: false")

	wantText(t, "close", closePython(t, cs, "a"), false, `closed session "a"`)
	wantText(t, "close again", closePython(t, cs, "a"), true, `session "a" is not open`)
	wantText(t, "close unknown", closePython(t, cs, "nope"), true, `session "nope" is not open`)
	res = runPython(t, cs, map[string]any{"session": "a", "program": "return 'x' in globals()"}, nil)
	wantText(t, "reopened", res, false, `opened session "a"`, "value: false")
}

// Names are checked; an open session's address space is fixed.
//
// Catalogue C602.
func TestMCPSessionBadArguments(t *testing.T) {
	t.Parallel()
	cs := mcpServe(t, nil)
	for _, name := range []string{"", strings.Repeat("n", 65), "has space", "tab\t", "é"} {
		res := runPython(t, cs, map[string]any{"session": name, "program": "return 1"}, nil)
		wantText(t, strconv.Quote(name), res, true, "session must be 1 to 64 characters from A-Z a-z 0-9 _ - . :")
	}
	res := runPython(t, cs, map[string]any{"session": strings.Repeat("n", 64), "program": "return 1",
		"limits": map[string]any{"addressSpaceMb": 400}}, nil)
	wantText(t, "64 characters, opening with an address space", res, false, "value: 1")
	res = runPython(t, cs, map[string]any{"session": strings.Repeat("n", 64), "program": "return 1",
		"limits": map[string]any{"addressSpaceMb": 400}}, nil)
	wantText(t, "address space of an open session", res, true, "limits.addressSpaceMb is fixed for the session's lifetime")
}

// CODERUN_MAX_SESSIONS bounds the names; closing one makes room.
//
// Catalogue C603.
func TestMCPSessionCap(t *testing.T) {
	t.Parallel()
	cs := mcpServeEnv(t, nil, map[string]string{"CODERUN_MAX_SESSIONS": "2"})
	for _, name := range []string{"one", "two"} {
		wantText(t, name, runPython(t, cs, map[string]any{"session": name, "program": "return 1"}, nil), false, "value: 1")
	}
	res := runPython(t, cs, map[string]any{"session": "three", "program": "return 1"}, nil)
	wantText(t, "at the cap", res, true, `cannot open session "three": session cap reached (CODERUN_MAX_SESSIONS=2); close one with close_python_session`)
	wantText(t, "a run without a session at the cap", runPython(t, cs, map[string]any{"program": "return 2"}, nil), false, "value: 2")
	wantText(t, "close", closePython(t, cs, "one"), false, "closed")
	wantText(t, "after a close", runPython(t, cs, map[string]any{"session": "three", "program": "return 3"}, nil), false, "value: 3")
}

// A session whose process dies between calls is reported once, as lost,
// with what the next call does; that call starts a fresh session.
//
// Catalogue C604.
func TestMCPSessionLost(t *testing.T) {
	onlyInTier(t, "process") // the test kills the child by its pid, which a sandbox's pid namespace hides
	t.Parallel()
	cs := mcpServe(t, nil)
	res := runPython(t, cs, map[string]any{"session": "s", "program": "import os\nx = 1\nreturn os.getpid()"}, nil)
	wantText(t, "open", res, false, "value: ")
	pid, err := strconv.Atoi(strings.TrimSpace(text(res)[strings.LastIndex(text(res), "value: ")+len("value: "):]))
	if err != nil {
		t.Fatalf("no pid in %q", text(res))
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) { // until the daemon reaps it
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the daemon notices the death between runs
	res = runPython(t, cs, map[string]any{"session": "s", "program": "return x"}, nil)
	wantText(t, "after the kill", res, true, `session "s" was lost`, `the next run_python call with session "s" starts a fresh session`)
	res = runPython(t, cs, map[string]any{"session": "s", "program": "return 'x' in globals()"}, nil)
	wantText(t, "next call", res, false, `opened session "s"`, "value: false")
}

// A run that ends its session (its process exits mid-run) says so in its
// own result; the next call opens a fresh session.
//
// Catalogue C604.
func TestMCPSessionEndedByRun(t *testing.T) {
	t.Parallel()
	cs := mcpServe(t, nil)
	wantText(t, "open", runPython(t, cs, map[string]any{"session": "s", "program": "return 0"}, nil), false, "value: 0")
	res := runPython(t, cs, map[string]any{"session": "s", "program": "import os\nos._exit(3)"}, nil)
	wantText(t, "exit mid-run", res, true, "error (worker-exit)", `session "s" was lost`, "starts a fresh session")
	res = runPython(t, cs, map[string]any{"session": "s", "program": "return 1"}, nil)
	wantText(t, "after the exit", res, false, `opened session "s"`, "value: 1")
}

// The client going away closes its sessions, one of them mid-run: the
// daemon exits without waiting for the run and no process is left.
//
// Catalogue C605.
func TestMCPSessionDisconnect(t *testing.T) {
	leakcheck.Check(t)
	c := rawMCP(t)
	c.initialize()
	for i, name := range []string{"p", "q"} {
		c.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i+2) + `,"method":"tools/call","params":{"name":"run_python","arguments":{"session":"` + name + `","program":"y = 2\nreturn 1"}}}`)
		if got := c.next(); !strings.Contains(got, `opened session \"`+name+`\"`) {
			t.Fatalf("session %s: %s", name, got)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_python","arguments":{"session":"q","program":"import time\ntime.sleep(60)"}}}`)
	time.Sleep(time.Second) // the run is in the session's child
	c.hangUp()              // within 30 s, so without waiting for the run's 60
}
