package session

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

func callFrame(id int, fn string) string {
	return `{"type":"call","id":` + itoa(id) + `,"global":"tools","name":"` + fn + `","args":{}}`
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i)) }

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestGroupG: hostile programs (TEST-CATALOGUE.md group G) at session level.
func TestGroupG(t *testing.T) {
	echoTools := map[string]behaviour{"echo": echo()}
	cases := []tcase{
		{name: "C130", program: "import os\nos.write(3, b'not-json\\n{\"type\":\"unknown\"}\\n{\"type\":\"done\",\"error\":{\"message\":42}}\\n')\nreturn \"survived\"",
			value: `"survived"`},
		{name: "C131", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 8000 }), bindings: tools("echo"), client: echoTools, nCalls: 1,
			program: "import os\nr = await tools.echo({\"ping\": True})\nos.write(3, b'{\"type\":\"call\",\"id\":1,\"global\":\"tools\",\"name\":\"forged\",\"args\":{}}\\n')\nreturn r",
			value:   `{"ping":true}`},
		{name: "C131b-reply", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 8000 }), bindings: tools("echo"), client: echoTools, nCalls: 0,
			// the daemon's reply to an unknown call reaches the child: read it raw.
			program: "import os\nos.write(3, b'{\"type\":\"call\",\"id\":0,\"global\":\"tools\",\"name\":\"forged\",\"args\":{}}\\n')\nimport select\nselect.select([3], [], [], 5)\nreturn os.read(3, 4096).decode()",
			value:   `"{\"type\":\"reply\",\"id\":0,\"ok\":false,\"message\":\"unknown binding \\\"tools.forged\\\"\"}\n"`},
		{name: "C133", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 8000 }), bindings: tools("echo"), client: echoTools, nCalls: 1,
			program: "try:\n    await tools.echo({\"bad\": float(\"inf\")})\nexcept RuntimeError as e:\n    first = str(e)\nreturn [first, await tools.echo({\"ok\": True})]",
			value:   `["binding arguments must be lossless JSON (non-finite float) at $[\"bad\"]; NaN and infinity have no JSON form: return None or a string",{"ok":true}]`},
		{name: "C134", bindings: tools("echo"), client: echoTools, nCalls: 1,
			program: forge(`{"type":"call","id":7,"global":"tools","name":"echo","args":9007199254740993}`, `{"type":"done","value":9007199254740993}`) +
				"return await tools.echo({\"ok\": True})", value: `{"ok":true}`},
		{name: "C135", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 128 }), program: "for _ in range(50):\n    print(\"aaaaaaaaaa\")",
			value: "null", logs: append(repeat("aaaaaaaaaa", 9), marker(128))},
		{name: "C136", program: `return {"lone": "a\ud800b", "spelled": "\ud83d\ude00"}`, value: `{"lone":"a\ud800b","spelled":"😀"}`},
		{name: "C137a", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 8 }), program: `return "\ud800"`, value: `"\ud800"`},
		{name: "C137b", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 7 }), program: `return "\ud800"`,
			kind: protocol.KindOutputLimit, message: "completion value exceeded 7 bytes"},
		{name: "C139a", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 4 }), program: `return "é"`, value: `"é"`},
		{name: "C139b", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 4 }), program: `return "éx"`,
			kind: protocol.KindOutputLimit, message: "completion value exceeded 4 bytes"},
		{name: "C140", program: "import asyncio\nasync def boom():\n    raise ValueError(\"member failure\")\nasync with asyncio.TaskGroup() as tg:\n    tg.create_task(boom())",
			kind: protocol.KindException, contains: []string{"<program>", "member failure"}, excludes: []string{"bootstrap.py"}},
		{name: "C142", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 8000 }), bindings: tools("echo"), client: echoTools, nCalls: 1,
			program: "import asyncio, threading\nbox = {}\ndef worker():\n    box[\"v\"] = asyncio.run(tools.echo({\"from\": \"thread\"}))\nt = threading.Thread(target=worker)\nt.start()\nwhile t.is_alive():\n    await asyncio.sleep(0.01)\nreturn box[\"v\"]",
			value:   `{"from":"thread"}`},
		{name: "C143", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 6000 }), bindings: tools("slow", "release"), nCalls: 2,
			client:  map[string]behaviour{"slow": gatedV(`"late"`), "release": late(50, `"released"`)},
			program: C143, value: `"released"`},
		{name: "C144", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 6000 }), bindings: tools("slow", "release"), nCalls: 2,
			client:  map[string]behaviour{"slow": gatedV(`"late"`), "release": late(50, `"released"`)},
			program: "import __main__\n__main__.RuntimeError = ValueError\n" + C143, value: `"released"`},
		{name: "C154", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 30000 }),
			program: "import os\nfor _ in range(60000):\n    os.write(3, b\"x\")\n    os.sched_yield()\nos.write(3, b\"\\n\")\nprint(\"after-trickle\")\nreturn \"done\"",
			value:   `"done"`, logs: []string{"after-trickle"}},
		{name: "C147a", program: "class Sneaky(dict):\n    def items(self): return iter([])\n    def keys(self): return iter([])\n    def __iter__(self): return iter([])\n    def __len__(self): return 0\nreturn Sneaky(secret=[1, 2])",
			kind: protocol.KindInvalidOutput, message: "program completion must be lossless JSON (unsupported type (Sneaky))"},
		{name: "C147b", program: "class L(list):\n    pass\nreturn L([1])", kind: protocol.KindInvalidOutput,
			message: "program completion must be lossless JSON (unsupported type (L))"},
		{name: "C147c", program: `return {"secret": [1, 2]}`, value: `{"secret":[1,2]}`},
		{name: "C148", bindings: tools("echo"), client: echoTools,
			program: "class F(float):\n    pass\ntry:\n    await tools.echo({\"v\": F(2.5)})\nexcept RuntimeError as e:\n    return str(e)",
			value:   `"binding arguments must be lossless JSON (unsupported type (F)) at $[\"v\"]"`},
		{name: "C152", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64; l.MaxWallMs = 10000 }),
			program: "import os\nprint(\"y\" * 70000)\nos.write(1, b\"AFTER\")\nreturn \"done\"", value: `"done"`, logs: []string{marker(64)}},
		{name: "C156", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 4096 }), program: `raise ValueError("\x00" * (512 * 1024))`,
			kind: protocol.KindException, extra: endsTrunc(4096)},
		{name: "C74", program: "import __main__\n__main__.BaseException = RuntimeError\nraise ValueError(\"v\")",
			kind: protocol.KindException, contains: []string{"ValueError: v"}},
		{name: "C71", program: "class Meta(type):\n    @property\n    def __module__(cls):\n        raise RuntimeError(\"module refused\")\nclass Hostile(Exception, metaclass=Meta):\n    pass\nraise Hostile(\"original failure\")",
			kind: protocol.KindException, message: "Hostile: <diagnostic rendering failed>"},
		{name: "C90", program: "from decimal import getcontext, Inexact\ngetcontext().prec = 2\ngetcontext().traps[Inexact] = True\nreturn 1.2345678901234567",
			value: "1.2345678901234567"},
		{name: "C72", program: "class Meta(type):\n    @property\n    def __module__(cls):\n        raise RuntimeError(\"module refused\")\n    @property\n    def __name__(cls):\n        raise RuntimeError(\"name refused\")\nclass Hostile(Exception, metaclass=Meta):\n    pass\nraise Hostile(\"original failure\")",
			kind: protocol.KindException, message: "<unknown>: <diagnostic rendering failed>"},
		{name: "C95", bindings: []protocol.Namespace{{Global: "tools", Names: []string{"fail"}}}, client: map[string]behaviour{"fail": fail("nope")}, nCalls: 1,
			program: "try:\n    await tools.fail({})\nexcept RuntimeError as e:\n    return type(e).__name__ + \":\" + str(e)", value: `"RuntimeError:nope"`},
		{name: "C122", limits: lim(func(l *protocol.Limits) { l.CPUSeconds = 1; l.MaxWallMs = 15000 }),
			program: hijackPrelude + "import signal, time\nsignal.signal(signal.SIGXCPU, lambda *a: None)\nstart = time.process_time()\nwhile time.process_time() - start < 1.05:\n    pass\nreturn \"escaped\"",
			kind:    protocol.KindTimeout, budget: protocol.BudgetCPU, noValue: true,
			message: "CPU time exhausted (limit at most 1s; a stricter inherited RLIMIT_CPU can fire sooner)"},
		{name: "C149", bindings: tools("echo"), client: echoTools,
			program: "class Sneaky(dict):\n    def items(self): return iter([])\n    def keys(self): return iter([])\n    def __iter__(self): return iter([])\n    def __len__(self): return 0\ntry:\n    await tools.echo(Sneaky(secret=[1, 2]))\nexcept RuntimeError as e:\n    return str(e)",
			value:   `"binding arguments must be lossless JSON (unsupported type (Sneaky)) at $"`},
		{name: "C150", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 1024; l.AddressSpaceMb = 384; l.MaxWallMs = 15000 }),
			program: "return \"x\" * (100 * 1024 * 1024)", kind: protocol.KindOutputLimit, message: "completion value exceeded 1024 bytes"},
		{name: "C151", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 1024; l.AddressSpaceMb = 256 }),
			program: "print(\"x\" * (100 * 1024 * 1024))\nreturn \"done\"", value: `"done"`, logs: []string{marker(1024)}},
		{name: "C145", bindings: tools("echo"), client: echoTools, nCalls: 1, program: "v = await tools.echo(2**60)\nreturn v == 2**60", value: "true"},
		{name: "C146a", program: "return [2**53, 2**60]", value: `[9007199254740992,1152921504606846976]`},
		{name: "C146b", program: "return 2**53 + 1", kind: protocol.KindInvalidOutput,
			message: "program completion must be lossless JSON (integer not exactly representable as a double)"},
		{name: "C153", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 4096 }),
			program: forge(`{"type":"log","text":"first","truncated":"yes"}`, `{"type":"log","text":"MARK-A","truncated":true}`, `{"type":"log","text":"MARK-B","truncated":true}`),
			value:   "null", logs: []string{"first", marker(4096)}},
		{name: "C155", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 1024 }), program: `raise ValueError("boom-" + "x" * (8 * 1024 * 1024))`,
			kind: protocol.KindException, contains: []string{"boom-"}, extra: endsTrunc(1024)},
		{name: "C158", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 256; l.MaxWallMs = 10000 }),
			program: "print(\"x\\n\" * 500000, end=\"\")\nreturn \"done\"", value: `"done"`, logs: append(repeat("x", 63), marker(256)), maxElapsed: 8 * time.Second},
		{name: "C162", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 104 }), program: `print("y" * 100 + "\n" + "z" * 10, end="")`,
			value: "null", logs: []string{strings.Repeat("y", 100), marker(104)}},
		{name: "C164", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 256 }), program: "for _ in range(500):\n    print(\"\\x00\" * 10)",
			value: "null", logs: append(repeat(strings.Repeat("\x00", 10), 4), marker(256))},
		{name: "C177", program: `return {"\ud83d\ude00": 1, "\U0001f600": 2}`, kind: protocol.KindInvalidOutput,
			message: "program completion must be lossless JSON (duplicate dict key after surrogate-pair combining)"},
		{name: "C179", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 64 }), program: "for _ in range(10000):\n    print()",
			value: "null", logs: append(repeat("", 21), marker(64))},
		{name: "C182", program: "import os\nos.write(1, b\"stray stdout\\n\")\nos.write(2, b\"stray stderr\\n\")", value: "null",
			logsHave: []string{"stray stdout", "stray stderr"}},
		{name: "C183", program: "import sys\nsys.__stdout__.reconfigure(write_through=False)\nsys.__stderr__.reconfigure(write_through=False)\nsys.__stdout__.write(\"orig stdout\\n\")\nsys.__stderr__.write(\"orig stderr\\n\")\nreturn \"done\"",
			value: `"done"`, logsHave: []string{"orig stdout", "orig stderr"}},
		{name: "C185", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 64 }), program: forge(`{"type":"done","value":"` + strings.Repeat("B", 5000) + `"}`),
			kind: protocol.KindOutputLimit, message: "completion value exceeded 64 bytes"},
		{name: "C188", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 40 }),
			program: forge(`{"type":"done","error":{"kind":"exception","message":"` + strings.Repeat("F", 60000) + `"}}`),
			kind:    protocol.KindException, message: strings.Repeat("F", 25) + protocol.MessageMarker},
		{name: "C188b", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 40 }), program: `raise ValueError("R" * 100000)`,
			kind: protocol.KindException, extra: endsTrunc(40)},
		{name: "C189", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 4 }),
			program: forge(`{"type":"done","error":{"kind":"exception","message":"` + strings.Repeat("F", 500) + `"}}`),
			kind:    protocol.KindException, message: protocol.MessageMarker},
		{name: "C190", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 64 }),
			program: forge(`{"type":"done","error":{"kind":"exception","message":"中文中文中文"}}`), kind: protocol.KindException, message: "中文中文中文"},
		{name: "C191", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 66 }),
			program: forge(`{"type":"done","error":{"kind":"exception","message":"E` + strings.Repeat("😀", 2000) + `"}}`),
			kind:    protocol.KindException, message: "E" + strings.Repeat("😀", 12) + protocol.MessageMarker},
		{name: "forged-error-fields", program: forge(`{"type":"done","error":{"kind":"exception","message":"m","exceptionType":"X","line":3},"value":1}`),
			kind: protocol.KindException, message: "m", excType: "X", line: 3},
		{name: "forged-invalid-output", program: forge(`{"type":"done","value":-0}`), kind: protocol.KindInvalidOutput, message: protocol.MsgNonLossless},
		{name: "forged-null", program: forge(`{"type":"done","value":null}`) + "import time\ntime.sleep(5)", value: "null", maxElapsed: 4 * time.Second},
		{name: "forged-second-boot-ack", program: forge(`{"type":"boot-ack"}`) + "return 5", value: "5"},
	}
	runCases(t, nil, cases)
}

// TestHeavy: the binding-traffic and cap cases that move tens of MiB or
// thousands of calls (C132, C169–C178, C180), one at a time, with the
// configured ceilings the catalogue's env lines give them.
func TestHeavy(t *testing.T) {
	echoTools := map[string]behaviour{"echo": echo()}
	// Full catalogue sizes move ~130 MiB through the race detector; by default
	// the payloads are scaled down (same shape: every total still far exceeds
	// the socket buffer). CODERUN_TEST_HEAVY=1 runs the catalogue's sizes.
	chunk, big := 4194304, 66560
	if os.Getenv("CODERUN_TEST_HEAVY") == "" {
		chunk, big = 524288, 8192
	}
	cases := []tcase{
		{name: "C132", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 8000 }), bindings: tools("echo"), client: echoTools, nCalls: 1,
			program: "import os\nr = await tools.echo({\"ping\": True})\nos.write(3, b'{\"type\":\"call\",\"id\":1,\"global\":\"tools\",\"name\":\"' + b'n' * 100000 + b'\",\"args\":{}}\\n')\nreturn r",
			value:   `{"ping":true}`},
		{name: "C169", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 1000 }), bindings: tools("slow"), nCalls: 1,
			client:  map[string]behaviour{"slow": late(2500, "["+strings.Repeat("0,", 1999999)+"0]")},
			program: "return await tools.slow({})", kind: protocol.KindTimeout, budget: protocol.BudgetWall,
			message: "wall-clock ceiling reached (1000ms)", extra: cancelled(1)},
		{name: "C170", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 60000 }), bindings: tools("chunk"), nCalls: 8,
			client:  map[string]behaviour{"chunk": constV(`"` + strings.Repeat("A", chunk) + `"`)},
			program: "import asyncio\nparts = await asyncio.gather(*(tools.chunk({}) for _ in range(8)))\nreturn sum(len(p) for p in parts)", value: fmtInt(8 * chunk)},
		{name: "C171", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 10000 }), bindings: tools("chunk"), nCalls: 1,
			client:  map[string]behaviour{"chunk": constV(`"` + strings.Repeat("A", chunk) + `"`)},
			program: "import asyncio\ntask = asyncio.create_task(tools.chunk({}))\nawait asyncio.sleep(0.05)\nreturn \"done\"", value: `"done"`},
		{name: "C172", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 20000 }), bindings: tools("hang"), nCalls: 1024,
			client:  map[string]behaviour{"hang": hang()},
			program: "import os, time\nfor i in range(5000):\n    os.write(3, b'{\"type\":\"call\",\"id\":%d,\"global\":\"tools\",\"name\":\"hang\",\"args\":{}}\\n' % i)\ntime.sleep(30)",
			kind:    protocol.KindWorkerExit, message: protocol.MsgCallBacklog, maxElapsed: 15 * time.Second, extra: cancelled(1024)},
		{name: "C173", bindings: tools("echo"), client: echoTools, nCalls: 1025,
			program: "import asyncio\nr = await asyncio.gather(*(tools.echo(i) for i in range(1025)))\nreturn len(r)", value: "1025",
			extra: func(t *testing.T, _ protocol.Result, fc *fakeClient) {
				if fc.maxPending > 1024 {
					t.Errorf("client had %d calls unanswered at once", fc.maxPending)
				}
			}},
		{name: "C174", bindings: tools("slow"), nCalls: 1024, client: map[string]behaviour{"slow": late(5000, "null")},
			program: "import asyncio\ntasks = [asyncio.create_task(tools.slow(i)) for i in range(1024)]\nawait asyncio.sleep(0.2)\nreturn \"done\"",
			value:   `"done"`, maxElapsed: 4 * time.Second, extra: cancelled(1024)},
		{name: "C175", bindings: []protocol.Namespace{{Global: "t", Names: []string{"e"}}}, client: map[string]behaviour{"e": echo()}, nCalls: 1300,
			program: "import asyncio\nr = await asyncio.gather(*(t.e(i) for i in range(1300)))\nreturn len(r)", value: "1300"},
		{name: "C176", bindings: tools("hang"), client: map[string]behaviour{"hang": hang()}, nCalls: 1024,
			program: "import os\nos.write(3, b''.join(b'{\"type\":\"call\",\"id\":%d,\"global\":\"tools\",\"name\":\"hang\",\"args\":{}}\\n' % i for i in range(1025)) + b'{\"type\":\"done\",\"value\":1}\\n')\nimport time\ntime.sleep(30)",
			kind:    protocol.KindWorkerExit, message: protocol.MsgCallBacklog, extra: cancelled(1024)},
		{name: "C178", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 60000 }), bindings: tools("big"), nCalls: 1524,
			client: map[string]behaviour{"big": constV(`"` + strings.Repeat("B", big) + `"`)},
			program: `import os
def call(i):
    return b'{"type":"call","id":%d,"global":"tools","name":"big","args":{}}\n' % i
os.write(3, b"".join(call(i) for i in range(1024)))
lines = 0
while lines < 500:
    lines += os.read(3, 65536).count(b"\n")
os.write(3, b"".join(call(i) for i in range(1024, 1524)))
while lines < 1524:
    lines += os.read(3, 65536).count(b"\n")
return "done"`, value: `"done"`},
		{name: "C180", program: "import os\ndata = b\"a\" * 65535 + \"\\u0900\\u4f60\\u597d\\U0001f600\\U0010ffff\".encode()\nview = memoryview(data)\nwhile view:\n    view = view[os.write(1, view):]",
			value: "null", logs: []string{strings.Repeat("a", 65535) + "\u0900\u4f60\u597d\U0001f600\U0010ffff"}},
		{name: "C141", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 15000 }),
			program: "import threading, time\ndef spam():\n    while True:\n        print(\"y\" * 100)\nthreading.Thread(target=spam, daemon=True).start()\ntime.sleep(0.05)\nreturn \"x\" * 307200",
			value:   `"` + strings.Repeat("x", 307200) + `"`},
		{name: "C69", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 20000 }),
			program: "err = None\nfor i in range(3000):\n    try:\n        if err is None:\n            raise ValueError(i)\n        raise ValueError(i) from err\n    except ValueError as e:\n        err = e\nraise err",
			kind:    protocol.KindException, contains: []string{protocol.ChainMarker}, maxElapsed: 15 * time.Second},
		{name: "C194", program: "import os, time\nfor _ in range(16384):\n    os.write(3, b\"A\" * 4096)\nos.write(3, b\"A\" * 12289)\nos.write(3, b'\\n{\"type\":\"log\",\"text\":\"late\"}\\n')\ntime.sleep(30)",
			kind: protocol.KindWorkerExit, message: protocol.MsgFrameTooLong, logs: []string{}},
		{name: "C184", program: "import os, time\nchunk = b\"A\" * (8 * 1024 * 1024)\nfor _ in range(9):\n    os.write(3, chunk)\ntime.sleep(30)",
			kind: protocol.KindWorkerExit, message: protocol.MsgFrameTooLong, maxElapsed: 30 * time.Second},
		{name: "C192", program: "import os\nos.write(3, b\"A\" * 67108864 + b\"AAAA\\n\")",
			kind: protocol.KindWorkerExit, message: protocol.MsgFrameTooLong, logs: []string{}},
		{name: "C193", program: "import os\nos.write(3, b\"A\" * 67108864)\nos.write(3, b'\\n{\"type\":\"log\",\"text\":\"after-cap-frames\"}\\n')\nreturn \"done\"",
			value: `"done"`, logs: []string{"after-cap-frames"}},
	}
	if os.Getenv("CODERUN_TEST_HEAVY") != "" {
		cases = append(cases, tcase{name: "C186", limits: lim(func(l *protocol.Limits) { l.MaxLogBytes = 128 }),
			program: "import os\nos.write(3, b'{\"type\":\"log\",\"text\":\"' + b'\\\\u0000' * 4194304 + b'\"}\\n')\nreturn \"settled\"",
			value:   `"settled"`, logs: []string{marker(128)}},
			tcase{name: "C187", limits: lim(func(l *protocol.Limits) { l.MaxValueBytes = 64 }),
				program: "import os\nos.write(3, b'{\"type\":\"done\",\"error\":{\"kind\":\"exception\",\"message\":\"' + b'E' * (48 << 20) + b'\"}}\\n')\nimport time\ntime.sleep(10)",
				kind:    protocol.KindOutputLimit, message: "completion value exceeded 64 bytes"})
	}
	m := check(t, func(c *Config) {
		c.Limits.MaxWallMs = 60000
		c.Limits.MaxValueBytes = 1048576
		c.Limits.MaxLogBytes = 4194304
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, fc, elapsed := execute(t, m, c)
			c.verify(t, res, fc, elapsed)
		})
	}
}

const hijackPrelude = `import sys as _sys
def _hijacked(*_args, **_kwargs):
    raise RuntimeError("hijacked")
_boot = _sys.modules["__main__"]
for _name in list(vars(_boot)):
    if not (_name.startswith("__") and _name.endswith("__")):
        setattr(_boot, _name, _hijacked)
`

const C143 = `import asyncio, threading
def worker():
    async def go():
        try:
            await asyncio.wait_for(tools.slow({}), 0.1)
        except asyncio.TimeoutError:
            pass
    loop = asyncio.new_event_loop()
    loop.run_until_complete(go())
    loop.close()
t = threading.Thread(target=worker)
t.start()
while t.is_alive():
    await asyncio.sleep(0.01)
return await tools.release({})`

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func endsTrunc(capBytes int) func(*testing.T, protocol.Result, *fakeClient) {
	return func(t *testing.T, res protocol.Result, _ *fakeClient) {
		m := res.Error.Message
		if !strings.HasSuffix(m, protocol.MessageMarker) {
			t.Errorf("message does not end with the marker: …%q", m[max(0, len(m)-40):])
		}
		if n := len(jsonQuote(m)); n > capBytes {
			t.Errorf("compact JSON form is %d bytes > %d", n, capBytes)
		}
	}
}

// cancelled checks that the client received n $/cancelRequest before the result.
func cancelled(n int) func(*testing.T, protocol.Result, *fakeClient) {
	return func(t *testing.T, _ protocol.Result, fc *fakeClient) {
		_, c, _ := fc.snapshot()
		if c != n {
			t.Errorf("client received %d cancels, want %d", c, n)
		}
	}
}
