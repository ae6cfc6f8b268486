package e2e

import (
	"encoding/json"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

func expectError(t *testing.T, m *msg, code int, message string) {
	t.Helper()
	if m.Error == nil || m.Error.Code != code || m.Error.Message != message {
		t.Errorf("got %s, want error %d «%s»", m.raw, code, message)
	}
}

// C5: initialize describes the service.
func TestInitialize(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	m := d.call("initialize", `{"clientInfo":{"name":"e2e","version":"1"},"capabilities":{}}`)
	var r struct {
		ServerInfo struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"serverInfo"`
		Capabilities struct {
			Languages    []string         `json:"languages"`
			Isolation    string           `json:"isolation"`
			Reason       string           `json:"isolationReason"`
			LogStreaming bool             `json:"logStreaming"`
			Limits       map[string]int64 `json:"limits"`
			Python       struct {
				Executable string `json:"executable"`
				Version    string `json:"version"`
			} `json:"python"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatalf("%s: %v", m.raw, err)
	}
	c := r.Capabilities
	tier := suiteTier
	want := map[string]int64{"cpuSeconds": 60, "maxWallMs": 600000, "addressSpaceMb": 512, "maxLogBytes": 65536,
		"maxValueBytes": 32768, "graceMs": 3000, "maxConcurrentRuns": int64(2 * runtime.NumCPU())}
	if r.ServerInfo.Name != "coderun-rpc" || r.ServerInfo.Version == "" || len(c.Languages) != 1 || c.Languages[0] != "python" ||
		c.Isolation != tier || c.Reason != "CODERUN_ISOLATION="+tier || !c.LogStreaming || len(c.Limits) != len(want) {
		t.Errorf("initialize result %s", m.Result)
	}
	for k, v := range want {
		if c.Limits[k] != v {
			t.Errorf("limits.%s = %d, want %d", k, c.Limits[k], v)
		}
	}
	if c.Python.Executable != realPython || !regexp.MustCompile(`^3\.\d+\.\d+$`).MatchString(c.Python.Version) {
		t.Errorf("python %+v", c.Python)
	}
	expectError(t, d.call("initialize", ""), -32600, "server is already initialized")
}

// The default CODERUN_PYTHON_BIN (python3: a pyenv shim on this machine) is
// resolved to the interpreter the probe reports. A shim is a shell script
// that can miss the 5 s probe deadline on an overloaded machine; that one
// outcome is retried.
func TestDefaultPython(t *testing.T) {
	for attempt := 1; ; attempt++ {
		out, err := runCheck(t, map[string]string{useDefaultPython: ""})
		if err == nil {
			if !strings.Contains(string(out), "python: "+realPython+" (CPython 3.") || !strings.Contains(string(out), "smoke run: ok") {
				t.Errorf("--check report:\n%s", out)
			}
			return
		}
		if attempt < 3 && strings.Contains(string(out), "deadline exceeded") {
			t.Logf("attempt %d: probe deadline under load; retrying", attempt)
			continue
		}
		t.Fatalf("--check: %v\n%s", err, out)
	}
}

// docs/protocol.md §2 lifecycle errors, notification/request confusion, exit codes.
func TestLifecycleErrors(t *testing.T) {
	t.Parallel()
	d := start(t, nil)
	d.notify("initialized", `{}`)           // dropped before initialize
	d.notify("$/cancelRequest", `{"id":1}`) // dropped
	expectError(t, d.call("run", prog("return 1")), -32002, "server not initialized")
	expectError(t, d.call("shutdown", ""), -32002, "server not initialized")
	expectError(t, d.call("initialized", ""), -32002, "server not initialized")
	expectError(t, d.call("initialize", `[1]`), -32602, "params must be an object")
	expectError(t, d.call("initialize", `"x"`), -32602, "params must be an object")
	if m := d.call("initialize", `null`); m.Error != nil {
		t.Fatalf("initialize with null params: %s", m.raw)
	}
	expectError(t, d.call("nope/nope", `{}`), -32601, "method not found: nope/nope")
	expectError(t, d.call("exit", ""), -32601, "method not found: exit")
	expectError(t, d.call("$/cancelRequest", `{"id":1}`), -32601, "method not found: $/cancelRequest")
	d.send(`{"jsonrpc":"2.0","method":"run","params":{"program":"return 1"}}`) // no id: ignored
	d.notify("whatever/unknown", `{}`)
	expectOK(t, d.run(prog("return 7")), "7")
	if m := d.call("shutdown", ""); m.Error != nil || string(m.Result) != "null" {
		t.Fatalf("shutdown: %s", m.raw)
	}
	expectError(t, d.call("run", prog("return 1")), -32600, "server is shutting down")
	expectError(t, d.call("initialize", ""), -32600, "server is shutting down")
	expectError(t, d.call("initialized", ""), -32600, "server is shutting down")
	d.notify("exit", `null`)
	if code := d.waitExit(10 * time.Second); code != 0 {
		t.Errorf("exit after shutdown: code %d", code)
	}
	// No run ever produced a stray message: every message was a response.
	for _, e := range d.snapshot() {
		if e.m.Method != "" {
			t.Errorf("unexpected message %s", e.m.raw)
		}
	}
}

func TestExitWithoutShutdown(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	d.notify("exit", `{}`)
	if code := d.waitExit(10 * time.Second); code != 1 {
		t.Errorf("exit without shutdown: code %d", code)
	}
	d2 := start(t, nil) // exit before initialize is honoured too
	d2.notify("exit", `{}`)
	if code := d2.waitExit(10 * time.Second); code != 1 {
		t.Errorf("exit before initialize: code %d", code)
	}
}

// Malformed input gets its defined answer; the daemon keeps serving.
func TestMalformedInput(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	null := func(code int, message string) {
		t.Helper()
		m := d.wait("null")
		if string(m.ID) != "null" {
			t.Errorf("id %s", m.ID)
		}
		expectError(t, m, code, message)
	}
	d.send(`{"jsonrpc":"2.0","id":1,"method":"run","params":{`)
	null(-32700, "parse error: the message body is not valid JSON")
	d.writeRaw(frame("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"run\",\"params\":{\"program\":\"\xff\"}}"))
	null(-32700, "parse error: the message body is not valid UTF-8")
	d.send(`[{"jsonrpc":"2.0","id":3,"method":"run"}]`)
	null(-32600, "invalid request: not a JSON-RPC request or response object")
	d.send(`"hello"`)
	null(-32600, "invalid request: not a JSON-RPC request or response object")
	d.send(`{"jsonrpc":"2.0","id":4,"method":7}`)
	expectError(t, d.wait("4"), -32600, "invalid request: method must be a string")
	d.send(`{"jsonrpc":"2.0","id":5}`)
	expectError(t, d.wait("5"), -32600, "invalid request: no method, result or error member")
	for _, id := range []string{"-1", "1.5", "1e2", "null", "{}", "[1]", "true", "9223372036854775808"} {
		d.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"run","params":{"program":"return 1"}}`)
		null(-32600, "unsupported request id")
	}
	// Wrong param types.
	expectError(t, d.call("run", `"return 1"`), -32602, "params must be an object")
	expectError(t, d.call("run", ""), -32602, "params must be an object")
	expectError(t, d.call("run", `{"program":["return 1"]}`), -32602, "program must be a string")
	// Oversized Content-Length: read and discarded without a body parse.
	big := make([]byte, 67108865)
	copy(big, `{"jsonrpc":"2.0","id":6,"method":"run"`)
	d.writeRaw(append([]byte("Content-Length: 67108865\r\n\r\n"), big...))
	null(-32600, "message body of 67108865 bytes exceeds the 67108864-byte limit")
	// A huge string id and a string id with a lone surrogate escape are ids like any other.
	d.send(`{"jsonrpc":"2.0","id":"a\ud800b","method":"nope"}`)
	expectError(t, d.wait(`"a\ud800b"`), -32601, "method not found: nope")
	d.send(`{"jsonrpc":"2.0","id":9223372036854775807,"method":"nope"}`)
	expectError(t, d.wait("9223372036854775807"), -32601, "method not found: nope")
	// Headers: case-insensitive, Content-Type and unknown headers ignored.
	body := `{"jsonrpc":"2.0","id":"h","method":"run","params":{"program":"return 2"}}`
	d.writeRaw([]byte("content-type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-length:   " +
		itoa(len(body)) + "  \r\nX-Foo: bar\r\n\r\n" + body))
	expectOK(t, d.result(d.wait(`"h"`)), "2")
	// A response matching nothing is ignored; the daemon still serves.
	d.send(`{"jsonrpc":"2.0","id":424242,"result":{"x":1}}`)
	expectOK(t, d.run(prog("return 3")), "3")
}

func itoa(n int) string { return strconvItoa(n) }

// Unresyncable header blocks: one −32700 (id null), then teardown and exit 1.
func TestBadHeaders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ raw, fault string }{
		{"Content-Length: 10\n\n", `header line does not end in \r\n`},
		{"Content-Type: application/json\r\n\r\n", "missing Content-Length header"},
		{"Content-Length: ten\r\n\r\n", `Content-Length value "ten" is not a decimal number`},
		{"Content-Length: " + strings.Repeat("1", 5000) + "\r\n\r\n", "header block exceeds 4096 bytes"},
	} {
		d := started(t, nil)
		d.writeRaw([]byte(c.raw))
		expectError(t, d.wait("null"), -32700, "unusable header block: "+c.fault)
		if code := d.waitExit(10 * time.Second); code != 1 {
			t.Errorf("%q: exit code %d", c.raw, code)
		}
	}
}

// A request id already in use by a live run is refused; the run is unaffected.
func TestDuplicateRequestID(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_GRACE_MS": "200"})
	d.send(d.requestBody("77", "run", prog("import time\ntime.sleep(0.5)\nreturn 'first'")))
	time.Sleep(100 * time.Millisecond)
	d.send(d.requestBody("77", "run", prog("return 'second'")))
	expectError(t, d.wait("77"), -32600, "request id is already in use")
	expectOK(t, d.result(d.wait("77")), `"first"`)
	d.send(d.requestBody("77", "run", prog("return 'third'"))) // free again once answered
	expectOK(t, d.result(d.wait("77")), `"third"`)
}
