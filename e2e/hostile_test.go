package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Hostile child at the daemon's boundary (TEST-CATALOGUE.md group G):
// forged fd-3 frames, floods on fd 3 and fd 1 with and without newlines,
// fd 3 closed early, threads printing after done, a self-SIGSTOP, huge
// argument frames, deep values and exotic strings. Every case is followed
// by a probe run on the same daemon: the daemon keeps serving.
//
// The session-level twins (TestGroupG, TestHeavy in session/hostile_test.go)
// check the same catalogue ids against a fake client; these go through the
// real binary, its stdio framing and the rpc layer.

const tmarker = "[coderun] log capture truncated at "

type hcase struct {
	name    string
	program string
	extra   []string // extra run params members
	// expectations
	value   string // compact JSON value (success) unless kind != ""
	kind    string
	message string // exact, when set
	budget  string
	logs    []string // exact, when non-nil
	nCalls  int      // exact number of binding/call requests seen for this run (-1: don't check)
	within  time.Duration
	check   func(t *testing.T, r runResult, raw []byte)
}

func forgeFrames(frames ...string) string {
	var b strings.Builder
	b.WriteString("import os\n")
	for _, f := range frames {
		q, _ := json.Marshal(f + "\n")
		// a Python bytes literal from the JSON-quoted text (ASCII frames only)
		b.WriteString("os.write(3, " + "b" + string(q) + ")\n")
	}
	return b.String()
}

var bindTools = `"bindings":[{"global":"tools","functions":["echo","hang","len"]}]`

func hostileCases() []hcase {
	return []hcase{
		// --- forged frames (catalogue G and the session-level extras) ---
		{name: "C130-garbage", program: "import os\nos.write(3, b'not-json\\n{\"type\":\"unknown\"}\\n{\"type\":\"done\",\"error\":{\"message\":42}}\\n')\nreturn \"survived\"",
			value: `"survived"`},
		{name: "C131-forged-unknown-call", extra: []string{bindTools, `"limits":{"maxWallMs":8000}`}, nCalls: 1,
			program: "import os\nr = await tools.echo({\"ping\": True})\nos.write(3, b'{\"type\":\"call\",\"id\":1,\"global\":\"tools\",\"name\":\"forged\",\"args\":{}}\\n')\nreturn r",
			value:   `{"ping":true}`},
		{name: "C132-forged-huge-name", extra: []string{bindTools, `"limits":{"maxWallMs":8000}`}, nCalls: 1,
			program: "import os\nr = await tools.echo({\"ping\": True})\nos.write(3, b'{\"type\":\"call\",\"id\":1,\"global\":\"tools\",\"name\":\"' + b'n' * 100000 + b'\",\"args\":{}}\\n')\nreturn r",
			value:   `{"ping":true}`},
		{name: "C133-rejected-arg", extra: []string{bindTools, `"limits":{"maxWallMs":8000}`}, nCalls: 1,
			program: "try:\n    await tools.echo({\"bad\": float(\"inf\")})\nexcept RuntimeError as e:\n    first = str(e)\nreturn [first, await tools.echo({\"ok\": True})]",
			value:   `["binding arguments must be lossless JSON (non-finite float) at $[\"bad\"]; NaN and infinity have no JSON form: return None or a string",{"ok":true}]`},
		{name: "C134-unsafe-integers", extra: []string{bindTools}, nCalls: 1,
			program: forgeFrames(`{"type":"call","id":7,"global":"tools","name":"echo","args":9007199254740993}`, `{"type":"done","value":9007199254740993}`) +
				"return await tools.echo({\"ok\": True})", value: `{"ok":true}`},
		{name: "C153-forged-truncation", extra: []string{`"limits":{"maxLogBytes":4096}`},
			program: forgeFrames(`{"type":"log","text":"first","truncated":"yes"}`, `{"type":"log","text":"MARK-A","truncated":true}`, `{"type":"log","text":"MARK-B","truncated":true}`),
			value:   "null", logs: []string{"first", tmarker + "4096 bytes"}},
		{name: "C176-done-after-overcap-flood", extra: []string{bindTools}, nCalls: 1024,
			program: "import os, time\nos.write(3, b''.join(b'{\"type\":\"call\",\"id\":%d,\"global\":\"tools\",\"name\":\"hang\",\"args\":{}}\\n' % i for i in range(1025)) + b'{\"type\":\"done\",\"value\":1}\\n')\ntime.sleep(30)",
			kind:    "worker-exit", message: "call backlog exceeded 1024 in-flight binding calls (a binding never settled)", within: 20 * time.Second},
		{name: "C185-forged-big-value", extra: []string{`"limits":{"maxValueBytes":64}`},
			program: forgeFrames(`{"type":"done","value":"` + strings.Repeat("B", 5000) + `"}`),
			kind:    "output-limit", message: "completion value exceeded 64 bytes"},
		{name: "C188-forged-error-capped", extra: []string{`"limits":{"maxValueBytes":40}`},
			program: forgeFrames(`{"type":"done","error":{"kind":"exception","message":"` + strings.Repeat("F", 60000) + `"}}`),
			kind:    "exception", message: strings.Repeat("F", 25) + "… [truncated]"},
		{name: "C189-forged-error-marker-only", extra: []string{`"limits":{"maxValueBytes":4}`},
			program: forgeFrames(`{"type":"done","error":{"kind":"exception","message":"` + strings.Repeat("F", 500) + `"}}`),
			kind:    "exception", message: "… [truncated]"},
		{name: "forged-error-fields", program: forgeFrames(`{"type":"done","error":{"kind":"exception","message":"m","exceptionType":"X","line":3},"value":1}`),
			kind: "exception", message: "m"},
		{name: "forged-null-done", program: forgeFrames(`{"type":"done","value":null}`) + "import time\ntime.sleep(5)", value: "null", within: 4 * time.Second},
		{name: "forged-second-boot-ack", program: forgeFrames(`{"type":"boot-ack"}`) + "return 5", value: "5"},
		{name: "forged-reply-frame", program: forgeFrames(`{"type":"reply","id":0,"ok":true,"value":1}`) + "return 6", value: "6"},
		// --- floods ---
		{name: "fd3-newline-garbage-flood", extra: []string{`"limits":{"maxWallMs":30000}`},
			program: "import os\nbuf = b'garbage line\\n' * 100000\nfor _ in range(4):\n    os.write(3, buf)\nreturn 'ok'", value: `"ok"`, logs: []string{}},
		{name: "fd3-log-frame-flood", extra: []string{`"limits":{"maxLogBytes":1024,"maxWallMs":30000}`},
			program: "import os\nos.write(3, b'{\"type\":\"log\",\"text\":\"z\"}\\n' * 100000)\nreturn 'ok'", value: `"ok"`,
			check: func(t *testing.T, r runResult, _ []byte) {
				if len(r.Logs) == 0 || r.Logs[len(r.Logs)-1] != tmarker+"1024 bytes" {
					t.Errorf("logs do not end with the marker: %d entries", len(r.Logs))
				}
			}},
		{name: "C184-fd3-newline-free-flood", extra: []string{`"limits":{"maxWallMs":60000}`},
			program: "import os, time\nchunk = b\"A\" * (8 * 1024 * 1024)\nfor _ in range(9):\n    os.write(3, chunk)\ntime.sleep(30)",
			kind:    "worker-exit", message: "protocol frame exceeded 67108864 bytes on fd 3", within: 30 * time.Second},
		{name: "fd1-newline-free-flood", extra: []string{`"limits":{"maxLogBytes":4096,"maxWallMs":30000}`},
			program: "import os\nbuf = b'x' * (1 << 20)\nfor _ in range(20):\n    os.write(1, buf)\nreturn 'ok'", value: `"ok"`, logs: []string{tmarker + "4096 bytes"}},
		{name: "fd1-newline-flood", extra: []string{`"limits":{"maxLogBytes":4096,"maxWallMs":30000}`},
			program: "import os\nbuf = b'y\\n' * (1 << 20)\nfor _ in range(10):\n    os.write(1, buf)\nreturn 'ok'", value: `"ok"`, within: 20 * time.Second,
			check: func(t *testing.T, r runResult, _ []byte) {
				if len(r.Logs) < 2 || r.Logs[0] != "y" || r.Logs[len(r.Logs)-1] != tmarker+"4096 bytes" {
					t.Errorf("logs %d entries, last %q", len(r.Logs), r.Logs[len(r.Logs)-1])
				}
			}},
		{name: "fd2-newline-free-flood", extra: []string{`"limits":{"maxLogBytes":4096,"maxWallMs":30000}`},
			program: "import os\nbuf = b'e' * (1 << 20)\nfor _ in range(20):\n    os.write(2, buf)\nreturn 'ok'", value: `"ok"`, logs: []string{tmarker + "4096 bytes"}},
		// --- fd 3 closed early, threads after done, SIGSTOP ---
		{name: "close-fd3-then-return", program: "import os\nprint('before close', flush=True)\nos.close(3)\nreturn 'unreachable'",
			kind: "worker-exit", within: 15 * time.Second},
		{name: "close-fd3-then-loop", extra: []string{`"limits":{"maxWallMs":2000}`}, program: "import os\nos.close(3)\nwhile True:\n    pass",
			within: 15 * time.Second, check: func(t *testing.T, r runResult, _ []byte) {
				if r.Error == nil {
					t.Errorf("a run that closed fd 3 and looped succeeded")
				}
			}},
		{name: "threads-print-after-done", extra: []string{`"limits":{"maxWallMs":10000}`},
			program: "import os, threading, time\ndef spam():\n    while True:\n        print('late', flush=True)\n        os.write(1, b'native-late\\n')\n        os.write(2, b'err-late\\n')\nfor _ in range(4):\n    threading.Thread(target=spam, daemon=True).start()\ntime.sleep(0.05)\nreturn 'done'",
			value:   `"done"`, within: 15 * time.Second},
		{name: "self-SIGSTOP", extra: []string{`"limits":{"maxWallMs":1500}`},
			program: "import os, signal\nprint('stopping', flush=True)\nos.kill(os.getpid(), signal.SIGSTOP)\nreturn 'resumed?'",
			kind:    "timeout", budget: "wall", message: "wall-clock ceiling reached (1500ms)", logs: []string{"stopping"}, within: 10 * time.Second},
		// killpg(0): the caller's group. In tier sandbox the group's id is its
		// init's, 1 in the run's PID namespace, and killpg(1) is kill(-1).
		{name: "group-SIGSTOP", extra: []string{`"limits":{"maxWallMs":1500}`},
			program: "import os, signal\nos.killpg(0, signal.SIGSTOP)\nreturn 'resumed?'",
			kind:    "timeout", budget: "wall", within: 10 * time.Second},
		// --- huge argument frames, deep values ---
		{name: "huge-argument-8MiB", extra: []string{bindTools, `"limits":{"maxWallMs":60000}`}, nCalls: 1,
			program: "return await tools.len('x' * (8 * 1024 * 1024))", value: "8388610"},
		{name: "argument-over-frame-cap", extra: []string{bindTools, `"limits":{"maxWallMs":60000,"addressSpaceMb":512}`}, nCalls: 0,
			program: "return await tools.len('x' * (68 * 1024 * 1024))", within: 60 * time.Second,
			check: func(t *testing.T, r runResult, _ []byte) {
				if r.Error == nil {
					t.Errorf("a 68 MiB argument frame was accepted (value %.40s)", r.Value)
				}
			}},
		{name: "deep-value-5000", program: "v = 0\nfor _ in range(5000):\n    v = [v]\nreturn v", value: strings.Repeat("[", 5000) + "0" + strings.Repeat("]", 5000)},
		// 9000 levels: the e2e client decodes with encoding/json (max depth 10000);
		// the daemon itself forwards deeper values as raw bytes.
		{name: "deep-value-9000", extra: []string{`"limits":{"maxWallMs":30000}`}, program: "v = 0\nfor _ in range(9000):\n    v = [v]\nreturn v", within: 30 * time.Second,
			value: strings.Repeat("[", 9000) + "0" + strings.Repeat("]", 9000)},
		{name: "deep-argument-5000", extra: []string{bindTools}, nCalls: 1,
			program: "v = 0\nfor _ in range(5000):\n    v = [v]\nr = await tools.echo(v)\nn = 0\nwhile isinstance(r, list):\n    r = r[0]\n    n += 1\nreturn n", value: "5000"},
		{name: "deep-dict-value", program: "v = {}\nfor _ in range(3000):\n    v = {'k': v}\nreturn v", value: strings.Repeat(`{"k":`, 3000) + "{}" + strings.Repeat("}", 3000)},
		// --- exotic strings ---
		{name: "lone-surrogate-print", program: "print('a\\ud800b')\nreturn 'a\\udfffb'", value: `"a\udfffb"`, logs: []string{"a?b"}},
		{name: "nul-in-logs-and-value", program: "print('nul\\x00byte')\nreturn 'x\\x00y'", value: `"x\u0000y"`, logs: []string{"nul\x00byte"}},
		{name: "invalid-utf8-fd1", program: "import os\nos.write(1, b'bad\\xffutf\\xed\\xa0\\x80!\\n')\nos.write(1, b'tail\\xe4\\xbd')",
			value: "null", logs: []string{"bad\ufffdutf\ufffd\ufffd\ufffd!", "tail\ufffd\ufffd"}},
		{name: "invalid-utf8-fd3-log-frame", program: "import os\nos.write(3, b'{\"type\":\"log\",\"text\":\"bad\\xff\"}\\n')\nprint('after')\nreturn 1",
			value: "1", logs: []string{"after"}},
		{name: "surrogate-argument-roundtrip", extra: []string{bindTools}, nCalls: 1,
			program: "return await tools.echo({'s': 'a\\ud800\\x00\\u2028\\U0001f600'})", value: `{"s":"a\ud800\u0000` + "\u2028" + `😀"}`},
		{name: "C177-dup-key-after-combining", program: `return {"\ud83d\ude00": 1, "\U0001f600": 2}`, kind: "invalid-output",
			message: "program completion must be lossless JSON (duplicate dict key after surrogate-pair combining)"},
	}
}

func TestHostileChild(t *testing.T) {
	t.Parallel()
	// One daemon serves every case (its runs overlap, 4 at a time): each
	// case is then also a test that a hostile run does not disturb the
	// others. Bounds use the run's own wallMs (queue time excluded).
	d := started(t, map[string]string{"CODERUN_GRACE_MS": "200", "CODERUN_WARM_POOL": "0", "CODERUN_MAX_VALUE_BYTES": "1048576",
		"CODERUN_MAX_CONCURRENT_RUNS": "4"})
	d.behave("hang", hang)
	d.behave("len", func(p callParams) string { return `"result":` + itoa(len(p.Args)) })
	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			id := d.request("run", prog(c.program, c.extra...))
			m := d.waitFor(id, 3*time.Minute)
			r := d.result(m)
			if elapsed := time.Duration(r.Stats.WallMs) * time.Millisecond; c.within > 0 && elapsed > c.within {
				t.Errorf("settled after %v, want < %v", elapsed, c.within)
			}
			switch {
			case c.check != nil:
				c.check(t, r, m.raw)
			case c.kind == "" && c.value != "":
				expectOK(t, r, c.value)
			}
			if c.kind != "" {
				if r.Error == nil || r.Error.Kind != c.kind {
					t.Fatalf("got error %+v value %.80s, want kind %s", r.Error, r.Value, c.kind)
				}
				if c.message != "" && r.Error.Message != c.message {
					t.Errorf("message %.200q, want %.200q", r.Error.Message, c.message)
				}
				if c.budget != "" && r.Error.Budget != c.budget {
					t.Errorf("budget %q, want %q", r.Error.Budget, c.budget)
				}
			}
			if c.logs != nil && strings.Join(r.Logs, "\x01") != strings.Join(c.logs, "\x01") {
				t.Errorf("logs %.300q, want %.300q", r.Logs, c.logs)
			}
			if c.nCalls > 0 || (c.nCalls == 0 && strings.Contains(strings.Join(c.extra, ""), "bindings")) {
				n := 0
				for _, e := range d.snapshot() {
					var p callParams
					if e.m.Method == "binding/call" && json.Unmarshal(e.m.Params, &p) == nil && string(p.RunID) == id {
						n++
					}
				}
				if n != c.nCalls {
					t.Errorf("client saw %d binding/call requests, want %d", n, c.nCalls)
				}
			}
			// The daemon keeps serving.
			expectOK(t, d.run(prog("print('probe')\nreturn 'alive'")), `"alive"`)
		})
	}
}
