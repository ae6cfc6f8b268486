package session

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

func marker(n int) string { return protocol.LogMarker(int64(n)) }

func lim(f func(*protocol.Limits)) protocol.Limits {
	var l protocol.Limits
	f(&l)
	return l
}

// forge builds a program line writing frames to fd 3 in one os.write each.
func forge(frames ...string) string {
	var b strings.Builder
	b.WriteString("import os\n")
	for _, f := range frames {
		b.WriteString("os.write(3, " + pyBytes(f+"\n") + ")\n")
	}
	return b.String()
}

// pyBytes spells s as a Python bytes literal.
func pyBytes(s string) string {
	var b strings.Builder
	b.WriteString(`b"`)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			b.WriteString(`\x`)
			b.WriteString(strings.ToLower(strings.TrimPrefix(strings.ToUpper(string("0123456789abcdef"[c>>4])+string("0123456789abcdef"[c&15])), "")))
		}
	}
	b.WriteString(`"`)
	return b.String()
}

// TestGroupE: programs and bindings (TEST-CATALOGUE.md group E) at session level.
func TestGroupE(t *testing.T) {
	openA := `{"type":"log","text":"a","open":true}`
	cases := []tcase{
		{name: "C37", program: "x = 40\ny = 2\nprint(\"hello\", x + y)\nreturn {\"answer\": x + y}",
			value: `{"answer":42}`, logs: []string{"hello 42"}},
		{name: "C38", program: `import os
env = dict(os.environ)
env.pop("LC_CTYPE", None)
return {"keys": sorted(env),
        "tmpdirIsCwd": os.path.realpath(env.get("TMPDIR", "")) == os.path.realpath(os.getcwd()),
        "path": os.environ.get("PATH"), "home": os.environ.get("HOME")}`,
			value: `{"keys":["TMPDIR"],"tmpdirIsCwd":true,"path":null,"home":null}`, logs: []string{}},
		{name: "staging", program: `import os, sys
st = lambda p: oct(os.stat(p).st_mode & 0o777)
d = os.getcwd()
return {"dir": st(d), "bootstrap": st("bootstrap.py"), "protocol": st("protocol.py"),
        "prefix": os.path.basename(d).startswith("coderun-"), "argv0": sys.argv[0] == os.path.join(d, "bootstrap.py"),
        "files": sorted(os.listdir(d))}`,
			value: `{"dir":"0o700","bootstrap":"0o600","protocol":"0o600","prefix":true,"argv0":true,"files":["bootstrap.py","out","protocol.py"]}`},
		{name: "C39", bindings: tools("echo", "fail"), client: map[string]behaviour{"echo": wrap(), "fail": fail("nope")},
			program: `first = await tools.echo({"n": 1})
try:
    await tools.fail({})
except RuntimeError as e:
    caught = str(e)
return {"first": first, "caught": caught}`,
			value: `{"first":{"echoed":{"n":1}},"caught":"nope"}`, nCalls: 2,
			extra: func(t *testing.T, _ protocol.Result, fc *fakeClient) {
				calls, _, _ := fc.snapshot()
				if calls[0].runID != `"C39"` || calls[0].ns != "tools" || calls[0].fn != "echo" || string(calls[0].args) != `{"n":1}` {
					t.Errorf("first call = %+v", calls[0])
				}
				if calls[1].fn != "fail" || string(calls[1].args) != `{}` {
					t.Errorf("second call = %+v", calls[1])
				}
			}},
		{name: "C43", bindings: tools("odd"), client: map[string]behaviour{"odd": failRaw()},
			program: "try:\n    await tools.odd({})\nexcept RuntimeError as e:\n    return \"rejected: \" + str(e)",
			value:   `"rejected: <unrenderable rejection value>"`, nCalls: 1},
		{name: "C44", bindings: tools("fail"), client: map[string]behaviour{"fail": fail("")},
			program: "try:\n    await tools.fail({})\nexcept RuntimeError as e:\n    return \"rejected: \" + str(e)",
			value:   `"rejected: "`, nCalls: 1},
		{name: "C45", program: "return 2 + 2", value: "4"},
		{name: "C46", program: forge(`{"type":"done"}`) + "import time\ntime.sleep(5)",
			noValue: true, maxElapsed: 4 * time.Second},
		{name: "C47", program: "print(\"a\", \"b\")\nprint(\"c\")\nreturn None", value: "null", logs: []string{"a b", "c"}},
		{name: "C48", program: `print("partial", end="")`, value: "null", logs: []string{"partial"}},
		{name: "C49", program: "import os\nos.write(1, b\"one\\ntwo\\nthree\")", logs: []string{"one", "two", "three"}, value: "null"},
		{name: "C50", program: `import os
os.write(1, b"stdout-one\n"); os.write(2, b"stderr-one\n")
os.write(1, b"stdout-two\n"); os.write(2, b"stderr-two\n")`, value: "null",
			extra: func(t *testing.T, res protocol.Result, _ *fakeClient) {
				at := func(s string) int { return slices.Index(res.Logs, s) }
				if at("stdout-one") < 0 || at("stdout-one") > at("stdout-two") || at("stderr-one") < 0 || at("stderr-one") > at("stderr-two") {
					t.Errorf("order lost: %q", res.Logs)
				}
			}},
		{name: "C51", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 4096 }),
			program: "import os\nos.write(1, b\"A\" * 2_000_000)\nreturn \"ok\"", value: `"ok"`, logs: []string{marker(4096)}},
		{name: "C52", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 4096 }),
			program: "import os\nos.write(1, b\"\\x00\" * 4000)", logs: []string{marker(4096)}, value: "null"},
		{name: "C54", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 3072; l.MaxWallMs = 30000 }),
			program: "import os, time\nfor _ in range(3200):\n    os.write(1, b\"\\xff\")\n    time.sleep(0.001)",
			logs:    []string{marker(3072)}, value: "null"},
		{name: "C55", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 4096 }),
			program: forge(`{"type":"log","text":"` + strings.Repeat(`\ud800`, 1000) + `"}`),
			logs:    []string{marker(4096)}, value: "null"},
		{name: "C56", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
			program: "import os\nos.write(1, b\"A\" * 100 + b\"\\nSECOND\\n\")", logs: []string{marker(64)}, value: "null"},
		{name: "C57", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 1024 }),
			program: "import os\nos.write(1, b\"\\xe4\")\nos.sched_yield()\nos.write(1, b\"A\\n\")",
			logs:    []string{"\ufffdA"}, value: "null"},
		{name: "C58", program: `return {1: "first", "1": "second"}`, kind: protocol.KindInvalidOutput,
			message: "program completion must be lossless JSON (non-string dict key (int))"},
		{name: "C59", bindings: tools("sink"), program: "try:\n    await tools.sink({1: \"x\"})\nexcept RuntimeError as e:\n    return str(e)",
			value: `"binding arguments must be lossless JSON (non-string dict key (int)) at $; dict keys must be text: use str(key)"`},
		{name: "C60", program: "return {1, 2, 3}", kind: protocol.KindInvalidOutput,
			message: "program completion must be lossless JSON (unsupported type (set))"},
		{name: "C61", program: `return float("nan")`, kind: protocol.KindInvalidOutput,
			message: "program completion must be lossless JSON (non-finite float)"},
		{name: "C62", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 64 }), program: `return "V" * 5000`,
			kind: protocol.KindOutputLimit, message: "completion value exceeded 64 bytes"},
		{name: "C65a", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 1 }), program: "return 1.0", value: "1"},
		{name: "C65b", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 4 }), program: "return 1e-7", value: "1e-7"},
		{name: "C65c", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 2 }), program: "return 1.5",
			kind: protocol.KindOutputLimit, message: "completion value exceeded 2 bytes"},
		{name: "C66", program: "return [1.0, 100.0, 1.5, 0.1, 1e-7, 1e-6, 1e-5, 123.456, -2.5e-8, 1e21, float(2**60), 5e-324, 1.7976931348623157e308]",
			value: `[1,100,1.5,0.1,1e-7,0.000001,0.00001,123.456,-2.5e-8,1e+21,1152921504606846976,5e-324,1.7976931348623157e+308]`},
		{name: "C67", program: "$$invalid python$$", kind: protocol.KindException,
			contains: []string{"SyntaxError", `File "<program>"`}, excType: "SyntaxError", line: 1},
		{name: "C68", program: `raise ValueError("intentional")`, kind: protocol.KindException,
			contains: []string{"ValueError: intentional"}, excType: "ValueError", line: 1},
		{name: "C70", program: `class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("str refused")
    def __repr__(self):
        raise RuntimeError("repr refused")
raise Unprintable()`, kind: protocol.KindException, contains: []string{"Unprintable"},
			excludes: []string{"str refused", "repr refused"}},
		{name: "C77", program: "print('a', end='', flush=True)\nprint('b')", logs: []string{"ab"}, value: "null"},
		{name: "C78", program: forge(append([]string{`{"type":"log","text":"x","open":true}`}, slices.Repeat([]string{openA}, 3000)...)...) + `return "done"`,
			value: `"done"`, logs: []string{"x" + strings.Repeat("a", 3000)}},
		{name: "C79", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
			program: forge(`{"type":"log","text":"x","open":true}`, `{"type":"log","text":"","open":true}`, `{"type":"log","text":"y"}`),
			logs:    []string{"xy"}, value: "null"},
		{name: "C80", program: forge(append(append([]string{`{"type":"log","text":"x","open":true}`}, slices.Repeat([]string{openA}, 3000)...), `{"type":"log","text":"y"}`)...),
			logs: []string{"x" + strings.Repeat("a", 3000) + "y"}, value: "null"},
		{name: "C81", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
			program: forge(slices.Repeat([]string{openA}, 2000)...), logs: []string{strings.Repeat("a", 60), marker(64)}, value: "null"},
		{name: "C82", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
			program: "print('committed', end='', flush=True)\nprint('x' * 100)", logs: []string{"committed", marker(64)}, value: "null"},
		{name: "C83", program: "import os\nos.write(3, b'{\"type\":\"done\",\"value\":\"bad\\xffbyte\"}\\n')\nreturn \"ok\"", value: `"ok"`},
		{name: "C84", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
			program: forge(append(slices.Repeat([]string{openA}, 2000), `{"type":"log","text":"b"}`)...),
			logs:    []string{strings.Repeat("a", 60), marker(64)}, value: "null"},
		{name: "C85", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
			program: "print('a' * 30, end='', flush=True)\nprint('b' * 25)", logs: []string{strings.Repeat("a", 30) + strings.Repeat("b", 25)}, value: "null"},
		{name: "C86", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
			program: forge(`{"type":"log","text":"` + strings.Repeat("x", 61) + `","open":true}`), logs: []string{marker(64)}, value: "null"},
		{name: "C87", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
			program: "print('a' * 30, end='', flush=True)\nprint('b' * 30)", logs: []string{strings.Repeat("a", 30) + strings.Repeat("b", 30)}, value: "null"},
		{name: "C88", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
			program: forge(`{"type":"log","text":"`+strings.Repeat("a", 28)+`","open":true}`, `{"type":"log","text":"`+strings.Repeat("a", 31)+`"}`, `{"type":"log","text":"x","open":true}`),
			logs:    []string{strings.Repeat("a", 59), marker(64)}, value: "null"},
		{name: "C89", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
			program: "print('x' * 40, end='', flush=True)\nprint('y' * 40)", logs: []string{strings.Repeat("x", 40), marker(64)}, value: "null"},
		{name: "C91", bindings: tools("boom"), client: map[string]behaviour{"boom": fail("exploded")},
			program: "await tools.boom({})", kind: protocol.KindException, contains: []string{"exploded", "<program>"},
			excludes: []string{"bootstrap.py"}, excType: "RuntimeError", nCalls: 1},
		{name: "C92", bindings: tools("raw"), client: map[string]behaviour{"raw": fail("raw-nope")},
			program: "try:\n    await tools.raw({})\nexcept RuntimeError as e:\n    return str(e)", value: `"raw-nope"`, nCalls: 1},
		{name: "C93", program: `import os, time
second = b'{"type":"log","text":"second"}\n'
os.write(3, b'{"type":"log","text":"first"}\n' + second[:5])
time.sleep(0.2)
os.write(3, second[5:])
return "ok"`, value: `"ok"`, logs: []string{"first", "second"}},
		{name: "C94", bindings: []protocol.Namespace{{Global: "tools", Names: []string{"fail"},
			ErrorClass: &protocol.ErrorClass{Name: "ToolCallError", MemberNameProperty: "toolName"}}},
			client: map[string]behaviour{"fail": fail("x")}, nCalls: 1,
			program: `import __main__
def _boom(*a, **k):
    raise RuntimeError("hijacked")
__main__.Exception = ValueError
__main__.setattr = _boom
try:
    await tools.fail({})
except ToolCallError as e:
    return f"{type(e).__name__}:{e.toolName}"`, value: `"ToolCallError:fail"`},
		{name: "C98", bindings: []protocol.Namespace{{Global: "tools", Names: []string{"boom"},
			ErrorClass: &protocol.ErrorClass{Name: "ToolError", MemberNameProperty: "tool-name"}}},
			client: map[string]behaviour{"boom": fail("x")}, nCalls: 1,
			program: "try:\n    await tools.boom({})\nexcept ToolError as e:\n    return getattr(e, \"tool-name\")", value: `"boom"`},
		{name: "C101a", bindings: tools("lossy"), client: map[string]behaviour{"lossy": constV("-0.0")}, nCalls: 1,
			program: c101, value: `"binding resolution must be lossless JSON"`},
		{name: "C101b", bindings: tools("lossy"), client: map[string]behaviour{"lossy": constV("1e400")}, nCalls: 1,
			program: c101, value: `"binding resolution must be lossless JSON"`},
		{name: "C101c", bindings: tools("lossy"), client: map[string]behaviour{"lossy": constV("9007199254740993")}, nCalls: 1,
			program: c101, value: `"binding resolution must be lossless JSON"`},
		{name: "C101d", bindings: tools("lossy"), client: map[string]behaviour{"lossy": constV("1e-400")}, nCalls: 1,
			program: c101, value: `[0,"int"]`},
		{name: "C101e", bindings: tools("lossy"), client: map[string]behaviour{"lossy": constV("2.0")}, nCalls: 1,
			program: c101, value: `[2,"int"]`},
		{name: "C101f-invalid-utf8", bindings: tools("lossy"), client: map[string]behaviour{"lossy": constV("\"a\xffb\"")}, nCalls: 1,
			program: c101, value: `"binding resolution must be lossless JSON"`},
		{name: "C102", program: forge(`{"type":"done","value":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`),
			kind: protocol.KindOutputLimit, message: "completion value exceeded 32768 bytes"},
		{name: "C103", bindings: tools("deep"), client: map[string]behaviour{"deep": constV(strings.Repeat("[", 12000) + strings.Repeat("]", 12000))},
			nCalls: 1, program: "v = await tools.deep({})\nd = 0\nwhile isinstance(v, list):\n    d += 1\n    v = v[0] if v else None\nreturn d",
			value: "12000"},
		{name: "C105", bindings: tools("__class__"), client: map[string]behaviour{"__class__": constV(`"bridged"`)}, nCalls: 2,
			program: `return [await tools["__class__"]({}), await tools.__class__({})]`, value: `["bridged","bridged"]`},
		{name: "C106", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 4096 }), bindings: tools("measure"),
			client: map[string]behaviour{"measure": lenOf("payload")}, nCalls: 1,
			program: `return await tools.measure({"payload": "B" * 204800})`, value: "204800"},
		{name: "C107", bindings: tools("known"), program: "try:\n    await tools.nope({})\nexcept AttributeError as e:\n    return str(e)",
			value: `"tool 'nope' is not declared in namespace 'tools'"`},
		{name: "C108", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 128 }), bindings: tools("known"),
			client: map[string]behaviour{"known": constV(`"settled"`)}, nCalls: 1,
			program: `import os
os.write(3, b'{"type":"call","id":9001,"global":"tools","name":"' + b"n" * (8 << 20) + b'","args":{}}\n')
return await tools.known({})`, value: `"settled"`},
		{name: "C109", bindings: tools("known"), program: "try:\n    tools[\"absent\"]\nexcept KeyError as e:\n    return e.args[0]",
			value: `"tool 'absent' is not declared in namespace 'tools'"`},
	}
	for i := range cases {
		if cases[i].nCalls == 0 && cases[i].client == nil {
			continue
		}
	}
	runCases(t, nil, cases)
}

const c101 = "try:\n    v = await tools.lossy({})\n    return [v, type(v).__name__]\nexcept RuntimeError as e:\n    return str(e)"

// TestStreaming: run/log notifications are ledger-ordered, interleaved in
// fd-3 order with binding/call requests, and delivered before the result.
func TestStreaming(t *testing.T) {
	runCases(t, nil, []tcase{{
		name: "order", stream: true, bindings: tools("echo"), client: map[string]behaviour{"echo": echo()}, nCalls: 2,
		program: "print('a')\nawait tools.echo(1)\nprint('b', end='', flush=True)\nprint('c')\nawait tools.echo(2)\nimport os\nos.write(1, b'native\\n')\nreturn 1",
		value:   "1",
		extra: func(t *testing.T, res protocol.Result, fc *fakeClient) {
			_, _, order := fc.snapshot()
			want := []string{"log:a", "call:echo", "log:b", "log:c", "call:echo"}
			if len(order) < len(want) || !slices.Equal(order[:len(want)], want) {
				t.Errorf("order = %q, want prefix %q", order, want)
			}
			merged := map[int]string{}
			fc.mu.Lock()
			for _, ev := range fc.logs {
				merged[ev.Index] += ev.Text
			}
			after := fc.afterResult
			fc.mu.Unlock()
			if len(after) > 0 {
				t.Errorf("deliveries after the result: %q", after)
			}
			if len(merged) != len(res.Logs) {
				t.Fatalf("streamed %v, logs %q", merged, res.Logs)
			}
			for i, l := range res.Logs {
				if merged[i] != l {
					t.Errorf("streamed[%d] = %q, logs[%d] = %q", i, merged[i], i, l)
				}
			}
		},
	}, {
		name: "marker", stream: true, limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }),
		program: "for _ in range(100):\n    print('0123456789')", value: "null",
		extra: func(t *testing.T, res protocol.Result, fc *fakeClient) {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			if n := len(fc.logs); n == 0 || fc.logs[n-1].Text != marker(64) || fc.logs[n-1].Index != len(res.Logs)-1 {
				t.Errorf("marker not streamed last: %+v", fc.logs)
			}
		},
	}})
}

// jsonQuote is the compact JSON string form (docs/child-protocol-wire.md §2.7: no HTML escaping).
func jsonQuote(s string) string { return string(wireguard.AppendString(nil, s)) }
