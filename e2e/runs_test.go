package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// −32602 messages through the binary (C14, C15, C21, C22, C97, C98, C100,
// C104, C181, C163, C53 per run). Nothing is spawned for any of them.
func TestParamsValidation(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	b := func(bindings string) string { return `{"program":"return 1","bindings":` + bindings + `}` }
	ec := func(name, prop string) string {
		return b(`[{"global":"tools","functions":["boom"],"errorClass":{"name":` + name + `,"memberNameProperty":` + prop + `}}]`)
	}
	cases := []struct{ params, msg string }{
		{b(`[{"global":"tools","functions":["a", 7]}]`), "bindings[0].functions[1] must be a name or {name, description?, parameters?, returns?}"},
		{b(`[{"global":"tools","functions":"a"}]`), "bindings[0].functions must be an array of names or function objects"},
		{b(`[{"global":"tools"}]`), "bindings[0].functions must be an array of names or function objects"},
		{b(`[{"global":"tools","functions":["a","b","a"]}]`), `bindings[0].functions[2] "a" is a duplicate function name`},
		{b(`[{"global":"tools","functions":[]},{"global":"tools","functions":[]}]`), `bindings[1].global "tools" is a duplicate binding global`},
		{ec(`"ToolError"`, `""`), "bindings[0].errorClass.memberNameProperty must be a non-empty attribute name"},
		{ec(`"class"`, `"tool"`), `bindings[0].errorClass.name "class" is not a usable Python identifier`},
		{`{"program":"return 1","limits":{"maxLogBytes":63}}`, "limits.maxLogBytes must be at least 64, got 63"},
		{`{"program":"return 1","limits":{"addressSpaceMb":64}}`, "limits.addressSpaceMb must exceed the 67108864-byte interpreter baseline with room for the output budgets, got 64"},
		{`{"program":"return 1","limits":{"cpuSeconds":0}}`, "limits.cpuSeconds must be a positive integer, got 0"},
		{`{"program":"return 1","limits":{"maxWallMs":"5"}}`, `limits.maxWallMs must be a positive integer, got "5"`},
		{`{"program":"return 1","limits":{"maxWallMs":1e400}}`, "limits.maxWallMs must be a positive integer, got 1e400"},
		{`{"program":"return 1","limits":{"maxWallMs":600001}}`, "limits.maxWallMs must not exceed the daemon's configured 600000, got 600001"},
		{`{"program":"return 1","limits":{"maxWallMs":6.00001e5}}`, "limits.maxWallMs must not exceed the daemon's configured 600000, got 600001"},
		{`{"program":"return 1","limits":{"wallMs":1,"cpu":1}}`, "limits.cpu is not a known limit"},
		{`{"program":"return 1","stream":"true"}`, "stream must be a boolean"},
	}
	for _, g := range []string{"1bad", "class", "$tools", "lambda", "typeof"} {
		cases = append(cases, struct{ params, msg string }{b(`[{"global":"` + g + `","functions":[]}]`),
			`bindings[0].global "` + g + `" is not a usable Python identifier`})
	}
	for _, g := range []string{"__coderun_main__", "console", "__debug__", "__builtins__", "__name__"} {
		cases = append(cases, struct{ params, msg string }{b(`[{"global":"` + g + `","functions":[]}]`),
			`bindings[0].global "` + g + `" collides with a runtime-owned global`})
	}
	for _, m := range []string{"__traceback__", "__dict__", "__class__", "args", "name", "message", "stack"} {
		cases = append(cases, struct{ params, msg string }{ec(`"ToolError"`, `"`+m+`"`),
			`bindings[0].errorClass.memberNameProperty "` + m + `" is a reserved error member and cannot be assigned`})
	}
	ids := make([]string, len(cases))
	for i, c := range cases { // pipelined: all in flight at once
		ids[i] = d.request("run", c.params)
	}
	for i, c := range cases {
		expectError(t, d.wait(ids[i]), -32602, c.msg)
	}
	// Accepted spellings of the same limit value.
	for _, v := range []string{"100000", "1e5", "100000.0"} {
		expectOK(t, d.run(`{"program":"return 1","limits":{"maxWallMs":`+v+`}}`), "1")
	}
}

// C98 (accepted half) and C16: memberNameProperty need not be an
// identifier; an object-model member name stays dispatchable.
func TestErrorClassAndOddNames(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	d.behave("boom", fail("x"))
	r := d.run(prog("try:\n    await tools.boom({})\nexcept ToolError as e:\n    return getattr(e, \"tool-name\")",
		`"bindings":[{"global":"tools","functions":["boom"],"errorClass":{"name":"ToolError","memberNameProperty":"tool-name"}}]`))
	expectOK(t, r, `"boom"`)
	d.behave("__proto__", constant(`"proto-callable"`))
	r = d.run(prog(`return await tools["__proto__"]({})`, `"bindings":[{"global":"tools","functions":["__proto__"]}]`))
	expectOK(t, r, `"proto-callable"`)
	if r.Stats.BindingCalls != 1 {
		t.Errorf("bindingCalls %d", r.Stats.BindingCalls)
	}
	// wrap / echo: keyword arguments travel as an object, no argument as null.
	d.behave("w", wrap)
	r = d.run(prog(`return [await t.w(q="x"), await t.w(), await t["e"]([1, 2.5, "é"])]`,
		`"bindings":[{"global":"t","functions":["w","e"]}]`))
	expectOK(t, r, `[{"echoed":{"q":"x"}},{"echoed":null},[1,2.5,"é"]]`)
	// A JSON-RPC error without an error class raises RuntimeError(message).
	d.behave("nope", fail("tool said no"))
	r = d.run(prog("try:\n    await t.nope()\nexcept RuntimeError as e:\n    return str(e)", `"bindings":[{"global":"t","functions":["nope"]}]`))
	expectOK(t, r, `"tool said no"`)
}

// 16 overlapping runs, each with several concurrent binding calls answered
// out of order; every result matches its own run.
func TestOverlappingRuns(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_MAX_CONCURRENT_RUNS": "4"})
	d.behave("slow", func(p callParams) string {
		var a struct{ Run, K int }
		json.Unmarshal(p.Args, &a)
		time.Sleep(time.Duration((a.Run*7+a.K*13)%40) * time.Millisecond)
		return `"result":{"run":` + fmt.Sprint(a.Run) + `,"k":` + fmt.Sprint(a.K) + `,"rid":` + string(p.RunID) + `}`
	})
	const n = 16
	program := `import asyncio
rs = await asyncio.gather(*[tools.slow({"run": RUN, "k": k}) for k in range(5)])
print("run", RUN, "done")
assert all(r["run"] == RUN for r in rs), rs
return {"run": RUN, "ks": [r["k"] for r in rs], "rids": [r["rid"] for r in rs]}`
	ids := make([]string, n)
	for i := range ids {
		ids[i] = d.request("run", prog(strings.ReplaceAll(program, "RUN", fmt.Sprint(i)),
			`"bindings":[{"global":"tools","functions":["slow"]}]`, `"limits":{"maxWallMs":60000}`))
	}
	for i, id := range ids {
		r := d.result(d.wait(id))
		want := fmt.Sprintf(`{"run":%d,"ks":[0,1,2,3,4],"rids":[%s,%s,%s,%s,%s]}`, i, id, id, id, id, id)
		expectOK(t, r, want)
		if len(r.Logs) != 1 || r.Logs[0] != fmt.Sprintf("run %d done", i) || r.Stats.BindingCalls != 5 {
			t.Errorf("run %d: logs %q stats %+v", i, r.Logs, r.Stats)
		}
	}
	// binding/call ids are the daemon's own counter from 1, all distinct.
	seen := map[string]bool{}
	for _, e := range d.snapshot() {
		if e.m.Method == "binding/call" {
			if seen[string(e.m.ID)] {
				t.Errorf("binding/call id %s reused", e.m.ID)
			}
			seen[string(e.m.ID)] = true
		}
	}
	if len(seen) != 5*n || !seen["1"] || !seen[fmt.Sprint(5*n)] {
		t.Errorf("binding/call ids: %d distinct", len(seen))
	}
}

// C23: cancelling a queued run settles it without a child.
func TestCancelQueued(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "M")
	d := started(t, map[string]string{"CODERUN_MAX_CONCURRENT_RUNS": "1"})
	a := d.request("run", prog("import time\ntime.sleep(2)\nreturn \"a\""))
	b := d.request("run", prog(fmt.Sprintf("open(%q, \"w\").close()\nreturn \"b\"", marker)))
	time.Sleep(200 * time.Millisecond)
	d.notify("$/cancelRequest", `{"id":`+b+`}`)
	rb := d.result(d.wait(b))
	expectFailure(t, rb, "abort", "run cancelled by the client")
	if len(rb.Logs) != 0 || rb.Stats.WallMs != 0 || rb.Stats.CPUMs != 0 {
		t.Errorf("queued cancel: logs %q stats %+v", rb.Logs, rb.Stats)
	}
	expectOK(t, d.result(d.wait(a)), `"a"`)
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the cancelled run ran: %v", err)
	}
}

// C24: cancels that match nothing are ignored and answered by nothing.
func TestCancelUnknown(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	for _, p := range []string{`{"id":999999}`, `{"id":"nope"}`, `{"id":{"x":1}}`, `{}`} {
		d.notify("$/cancelRequest", p)
	}
	expectOK(t, d.run(prog("return 1")), "1")
	if n := len(d.snapshot()); n != 2 {
		t.Errorf("%d messages, want initialize + run responses", n)
	}
}

// C27 / C112: a cancel in the same write as its run wins; repeated cancels
// are harmless and the run is answered exactly once.
func TestCancelMidLoop(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_GRACE_MS": "200"})
	loop := prog("import time\nwhile True:\n    time.sleep(0.1)", `"limits":{"maxWallMs":4000}`)
	body := d.requestBody("1", "run", loop) // same write
	d.writeRaw(append(frame(body), frame(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`)...))
	expectFailure(t, d.result(d.wait("1")), "abort", "run cancelled by the client")

	id := d.request("run", prog("import time\nwhile True:\n    pass", `"limits":{"maxWallMs":4000}`))
	time.Sleep(200 * time.Millisecond)
	d.notify("$/cancelRequest", `{"id":`+id+`}`)
	d.notify("$/cancelRequest", `{"id":`+id+`}`)
	start := time.Now()
	expectFailure(t, d.result(d.wait(id)), "abort", "run cancelled by the client")
	if el := time.Since(start); el > 8*time.Second {
		t.Errorf("cancel took %v", el)
	}
	d.notify("$/cancelRequest", `{"id":`+id+`}`)
	expectOK(t, d.run(prog("return 1")), "1")
	n := 0
	for _, e := range d.snapshot() {
		if string(e.m.ID) == id {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d responses for run %s", n, id)
	}
}

// Cancelling mid-binding: the outstanding binding/call gets $/cancelRequest
// and its late answer is ignored.
func TestCancelMidBinding(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_GRACE_MS": "200"})
	d.behave("wait", hang)
	id := d.request("run", prog("print('before', flush=True)\nawait tools.wait({})\nreturn 1",
		`"bindings":[{"global":"tools","functions":["wait"]}]`, `"limits":{"maxWallMs":20000}`))
	call := d.waitEvent(func(m *msg) bool { return m.Method == "binding/call" }, 20*time.Second)
	d.notify("$/cancelRequest", `{"id":`+id+`}`)
	r := d.result(d.wait(id))
	expectFailure(t, r, "abort", "run cancelled by the client")
	if len(r.Logs) != 1 || r.Logs[0] != "before" {
		t.Errorf("logs %q", r.Logs)
	}
	d.waitEvent(func(m *msg) bool {
		return m.Method == "$/cancelRequest" && compact(m.Params) == `{"id":`+string(call.ID)+`}`
	}, 10*time.Second)
	d.send(`{"jsonrpc":"2.0","id":` + string(call.ID) + `,"result":"late"}`) // ignored
	expectOK(t, d.run(prog("return 2")), "2")
}

// C111: cancelling a live run keeps what it printed (streamed first).
func TestCancelKeepsLogs(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_GRACE_MS": "200"})
	var once sync.Once
	idc := make(chan string, 1)
	d.onLog = func(p json.RawMessage) {
		if strings.Contains(string(p), `"text":"started"`) {
			once.Do(func() { d.notify("$/cancelRequest", `{"id":`+<-idc+`}`) })
		}
	}
	id := d.request("run", prog("import time\nprint(\"started\", flush=True)\nwhile True:\n    time.sleep(0.1)",
		`"stream":true`, `"limits":{"maxWallMs":10000}`))
	idc <- id
	r := d.result(d.wait(id))
	expectFailure(t, r, "abort", "run cancelled by the client")
	if len(r.Logs) != 1 || r.Logs[0] != "started" {
		t.Errorf("logs %q", r.Logs)
	}
}

// Streaming: run/log notifications in capture order, before the response,
// never reordered relative to the run's binding/call requests; the final
// logs equal what was streamed.
func TestStreamingOrder(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	d.behave("step", late(50, `"ok"`))
	id := d.request("run", prog(`print("one")
await tools.step(1)
print("two")
import sys
print("three", file=sys.stderr)
await tools.step(2)
print("four", end="")
return "done"`, `"stream":true`, `"bindings":[{"global":"tools","functions":["step"]}]`))
	r := d.result(d.wait(id))
	expectOK(t, r, `"done"`)
	var seq []string
	var streamed []string
	for _, e := range d.snapshot() {
		switch {
		case e.m.Method == "run/log":
			var p struct {
				RunID     json.RawMessage `json:"runId"`
				Index     int             `json:"index"`
				Text      string          `json:"text"`
				Continued bool            `json:"continued"`
			}
			json.Unmarshal(e.m.Params, &p)
			if string(p.RunID) != id {
				t.Errorf("runId %s", p.RunID)
			}
			if p.Continued {
				streamed[p.Index] += p.Text
			} else {
				if p.Index != len(streamed) {
					t.Errorf("index %d after %d entries", p.Index, len(streamed))
				}
				streamed = append(streamed, p.Text)
			}
			seq = append(seq, "log:"+p.Text)
		case e.m.Method == "binding/call":
			var p callParams
			json.Unmarshal(e.m.Params, &p)
			seq = append(seq, "call:"+string(p.Args))
		case string(e.m.ID) == id:
			seq = append(seq, "result")
		}
	}
	want := "log:one call:1 log:two log:three call:2 log:four result"
	if got := strings.Join(seq, " "); got != want {
		t.Errorf("order:\n got %s\nwant %s", got, want)
	}
	if strings.Join(streamed, "|") != strings.Join(r.Logs, "|") {
		t.Errorf("streamed %q, logs %q", streamed, r.Logs)
	}
	// Without stream, nothing is streamed.
	before := len(d.snapshot())
	expectOK(t, d.run(prog("print('quiet')\nreturn 1")), "1")
	if after := d.snapshot(); len(after) != before+1 {
		t.Errorf("non-streaming run sent %d extra messages", len(after)-before-1)
	}
}

// C26: shutdown racing a run leaves nothing behind.
func TestShutdownWithLiveRuns(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	d := started(t, map[string]string{"TMPDIR": tmp, "CODERUN_GRACE_MS": "300"})
	loop := prog("import time\nwhile True:\n    time.sleep(0.1)", `"limits":{"maxWallMs":8000}`)
	d.writeRaw(append(frame(d.requestBody("1", "run", loop)), frame(d.requestBody("2", "shutdown", ""))...))
	r := d.result(d.wait("1"))
	expectFailure(t, r, "abort", "server is shutting down")
	m := d.wait("2")
	if m.Error != nil || string(m.Result) != "null" {
		t.Fatalf("shutdown: %s", m.raw)
	}
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "coderun-") {
			t.Errorf("%s left behind", e.Name())
		}
	}
	order := []string{}
	for _, e := range d.snapshot() {
		order = append(order, string(e.m.ID))
	}
	if got := strings.Join(order, ","); !strings.HasSuffix(got, "1,2") {
		t.Errorf("response order %s", got)
	}
	d.notify("exit", "{}")
	if code := d.waitExit(10 * time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// Stdin closed while a program loops forever: the daemon exits 0 and no
// process of the run survives.
func TestStdinClosedWhileLooping(t *testing.T) {
	onlyInTier(t, "process") // the program reports its own pid, which tier sandbox namespaces
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_GRACE_MS": "200"})
	pids := make(chan int, 2)
	d.behave("pid", func(p callParams) string {
		var n int
		json.Unmarshal(p.Args, &n)
		pids <- n
		return `"result":null`
	})
	d.request("run", prog(`import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
await tools.pid(os.getpid())
await tools.pid(child.pid)
while True:
    pass`, `"bindings":[{"global":"tools","functions":["pid"]}]`))
	var got []int
	for len(got) < 2 {
		select {
		case p := <-pids:
			got = append(got, p)
		case <-time.After(30 * time.Second):
			t.Fatalf("no pids; stderr:\n%s", d.stderr)
		}
	}
	d.stdin.Close()
	if code := d.waitExit(15 * time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
	for _, pid := range got {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("process %d survived the daemon (%v)", pid, err)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// SIGTERM / SIGINT to the daemon: every run aborted, every child gone, exit 0.
func TestSignals(t *testing.T) {
	onlyInTier(t, "process") // the program reports its own pid, which tier sandbox namespaces
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			d := started(t, map[string]string{"CODERUN_GRACE_MS": "200"})
			pids := make(chan int, 1)
			d.behave("pid", func(p callParams) string {
				var n int
				json.Unmarshal(p.Args, &n)
				pids <- n
				return `"result":null`
			})
			id := d.request("run", prog("import os\nawait tools.pid(os.getpid())\nwhile True:\n    pass",
				`"bindings":[{"global":"tools","functions":["pid"]}]`))
			pid := <-pids
			d.cmd.Process.Signal(sig)
			r := d.result(d.wait(id))
			expectFailure(t, r, "abort", "server is shutting down")
			if code := d.waitExit(15 * time.Second); code != 0 {
				t.Errorf("exit code %d", code)
			}
			if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
				t.Errorf("run process %d survived", pid)
			}
		})
	}
}

// −32001 when the queue is full.
func TestQueueFull(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_MAX_CONCURRENT_RUNS": "1", "CODERUN_MAX_QUEUED_RUNS": "1",
		"CODERUN_WARM_POOL": "0", "CODERUN_GRACE_MS": "200"})
	a := d.request("run", prog("import time\ntime.sleep(1)\nreturn 'a'"))
	b := d.request("run", prog("return 'b'"))
	expectError(t, d.call("run", prog("return 'c'")), -32001, "run queue is full")
	expectError(t, d.call("run", `{"program":7}`), -32001, "run queue is full") // before validation
	expectOK(t, d.result(d.wait(a)), `"a"`)
	r := d.result(d.wait(b))
	expectOK(t, r, `"b"`)
	if r.Stats.QueueMs < 500 {
		t.Errorf("queueMs %d", r.Stats.QueueMs)
	}
}

// A refused completion value names where it is ($-path) and how to return it
// instead (hint); tuples are arrays and the exact numpy scalars their values.
func TestRefusedValueSaysWhereAndHow(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	for _, c := range []struct{ program, path, hint string }{
		{`return {"rows": [{"a": 1}, {"a": {2}}]}`, `$["rows"][1]["a"]`, "a set has no JSON form: return sorted(list(...)) instead"},
		{"async def f():\n    return 1\nreturn {'x': f()}", `$["x"]`, "a coroutine is not a value: did you forget await?"},
		{`return {1: "x"}`, "$", "dict keys must be text: use str(key)"},
		{"return object()", "$", ""},
	} {
		r := d.run(prog(c.program))
		if r.Error == nil || r.Error.Kind != "invalid-output" || r.Error.Path == nil || *r.Error.Path != c.path ||
			(c.hint == "") != (r.Error.Hint == nil) || r.Error.Hint != nil && *r.Error.Hint != c.hint {
			t.Errorf("%q: %+v", c.program, r.Error)
		}
	}
	if r := d.run(prog("return 1, (2, 'a')")); r.Error != nil || string(r.Value) != `[1,[2,"a"]]` {
		t.Errorf("tuple: %s %+v", r.Value, r.Error)
	}
}

// The values pandas code returns (numpy scalars) come back as numbers; an
// array is refused with its hint.
func TestNumpyScalarsAreValues(t *testing.T) {
	t.Parallel()
	py := venvPython(t, "numpy")
	d := started(t, map[string]string{"CODERUN_PYTHON_BIN": py, "CODERUN_ADDRESS_SPACE_MB": "2048"})
	r := d.run(prog("import numpy as np\na = np.arange(4)\nreturn {'sum': a.sum(), 'mean': a.mean(), 'any': (a > 2).any(), 'f32': np.float32(0.5)}"))
	if r.Error != nil || string(r.Value) != `{"sum":6,"mean":1.5,"any":true,"f32":0.5}` {
		t.Errorf("scalars: %s %+v", r.Value, r.Error)
	}
	r = d.run(prog("import numpy as np\nreturn [np.arange(3)]"))
	if r.Error == nil || r.Error.Path == nil || *r.Error.Path != "$[0]" || r.Error.Hint == nil || *r.Error.Hint != "return a.tolist()" {
		t.Errorf("array: %+v", r.Error)
	}
}

// A host's failure that names a built-in exception type (error.data.type)
// raises that type in the program; any other name raises RuntimeError.
func TestHostErrorTypes(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	d.behave("missing", func(callParams) string {
		return `"error":{"code":-32000,"message":"user_id","data":{"type":"KeyError"}}`
	})
	d.behave("exit", func(callParams) string {
		return `"error":{"code":-32000,"message":"bye","data":{"type":"SystemExit"}}`
	})
	program := "out = []\nfor f in (tools.missing, tools.exit):\n    try:\n        await f()\n" +
		"    except Exception as e:\n        out.append([type(e).__name__, e.args[0]])\nreturn out"
	r := d.run(prog(program, `"bindings":[{"global":"tools","functions":["missing","exit"]}]`))
	if r.Error != nil || string(r.Value) != `[["KeyError","user_id"],["RuntimeError","bye"]]` {
		t.Errorf("%s %+v", r.Value, r.Error)
	}
}
