"""Binding proxies, calls and replies (docs/child-protocol-wire.md §2.9 child side, docs/child-protocol-child.md §3.5)."""

import json
import time

from conftest import Child, run, ns, reply_ok, reply_err, echo, MIB

TOOLS = [ns("tools", "echo", "fail")]


def wrap_or_fail(frame):
    if frame["name"] == "fail":
        return reply_err(frame, "nope")
    return reply_ok(frame, {"echoed": frame["args"]})


def test_bindings_both_ways():
    """C39: an ok reply returns, an error reply raises RuntimeError(message)."""
    prog = ("first = await tools.echo({'n': 1})\n"
            "try:\n"
            "    await tools.fail({})\n"
            "except RuntimeError as e:\n"
            "    caught = str(e)\n"
            "return {'first': first, 'caught': caught}")
    res = run(prog, wrap_or_fail, TOOLS)
    assert res.value == {"first": {"echoed": {"n": 1}}, "caught": "nope"}
    assert res.raw[1] == b'{"type":"call","id":0,"global":"tools","name":"echo","args":{"n":1}}'
    assert [c["id"] for c in res.calls] == [0, 1]
    assert res.calls[1]["args"] == {}


def test_forgotten_await_names_the_binding():
    """The never-awaited warning names tools.echo, not the bootstrap's closure."""
    for prog in ("c = tools.echo(1)\nreturn 1", "tools.echo(1)\nreturn 1"):
        res = run(prog, echo, TOOLS)
        assert res.value == 1 and res.calls == []
        assert "RuntimeWarning: coroutine 'tools.echo' was never awaited" in res.logs[0]


def test_calling_conventions():
    prog = ("return [await tools.echo(5), await tools.echo(), await tools.echo(q='a', n=1),\n"
            "        await tools['echo']([1, 2]), await tools.echo(None)]")
    res = run(prog, echo, TOOLS)
    assert res.value == [5, None, {"q": "a", "n": 1}, [1, 2], None]
    assert [c["args"] for c in res.calls] == [5, None, {"q": "a", "n": 1}, [1, 2], None]


def test_type_errors_at_call_time():
    prog = ("out = []\n"
            "for f in (lambda: tools.echo(1, 2), lambda: tools.echo(1, q=2)):\n"
            "    try:\n"
            "        f()\n"
            "    except TypeError as e:\n"
            "        out.append(str(e))\n"
            "return out")
    res = run(prog, echo, TOOLS)
    assert res.value == [
        "tools.echo() takes at most 1 positional argument (2 given)",
        "tools.echo() takes either one positional argument or keyword arguments, not both"]
    assert res.calls == []


def test_undeclared_members():
    """C107, C109."""
    prog = ("out = []\n"
            "try:\n"
            "    tools.nope\n"
            "except AttributeError as e:\n"
            "    out.append(str(e))\n"
            "try:\n"
            "    tools['absent']\n"
            "except KeyError as e:\n"
            "    out.append(e.args[0])\n"
            "return out")
    assert run(prog, echo, [ns("tools", "known")]).value == [
        "tool 'nope' is not declared in namespace 'tools'",
        "tool 'absent' is not declared in namespace 'tools'"]


def test_members_shadowing_object_internals():
    """C16, C105: declared names route to the bridge before normal attribute resolution."""
    prog = ("return [await tools['__class__']({}), await tools.__class__({}),\n"
            "        await tools['__proto__']({}), await tools['my-tool'](1)]")
    res = run(prog, lambda f: reply_ok(f, "bridged:" + f["name"]),
              [ns("tools", "__class__", "__proto__", "my-tool")])
    assert res.value == ["bridged:__class__", "bridged:__class__", "bridged:__proto__",
                         "bridged:my-tool"]
    assert [c["name"] for c in res.calls] == ["__class__", "__class__", "__proto__", "my-tool"]


def test_error_class():
    """C94 (without hijack), C98, C95: declared error classes and RuntimeError otherwise."""
    prog = ("try:\n"
            "    await tools.boom({})\n"
            "except ToolError as e:\n"
            "    return [type(e).__name__, str(e), list(e.args), getattr(e, 'tool-name'),\n"
            "            isinstance(e, Exception), type(e).__mro__[1].__name__,\n"
            "            e.__cause__ is None, e.__suppress_context__]")
    res = run(prog, lambda f: reply_err(f, "x"),
              [ns("tools", "boom", error_class=("ToolError", "tool-name"))])
    assert res.value == ["ToolError", "x", ["x"], "boom", True, "Exception", True, True]
    prog = ("try:\n"
            "    await tools.fail({})\n"
            "except RuntimeError as e:\n"
            "    return type(e).__name__ + ':' + str(e)")
    assert run(prog, wrap_or_fail, TOOLS).value == "RuntimeError:nope"


def test_host_named_builtin_types():
    """A reply naming one of HOST_ERROR_TYPES raises that built-in type; a namespace's error
    class still wins; another name (forged past the daemon) raises RuntimeError."""
    def host(kind):
        return lambda f: dict(reply_err(f, "user_id"), exceptionType=kind)
    prog = ("try:\n"
            "    await tools.fail({})\n"
            "except Exception as e:\n"
            "    return [type(e).__name__, str(e), e.args[0]]")
    assert run(prog, host("KeyError"), TOOLS).value == ["KeyError", "'user_id'", "user_id"]
    assert run(prog, host("ConnectionRefusedError"), TOOLS).value == [
        "ConnectionRefusedError", "user_id", "user_id"]
    assert run(prog, host("SystemExit"), TOOLS).value == ["RuntimeError", "user_id", "user_id"]
    assert run(prog, host("KeyError"), [ns("tools", "fail", error_class=("ToolError", "tool"))]).value == [
        "ToolError", "user_id", "user_id"]


def test_empty_and_unrenderable_messages():
    """C44 (empty message stays empty); a non-string message is rendered inertly."""
    prog = ("out = []\n"
            "for _ in range(2):\n"
            "    try:\n"
            "        await tools.fail({})\n"
            "    except RuntimeError as e:\n"
            "        out.append('rejected: ' + str(e))\n"
            "return out")
    msgs = iter(["", None])

    def h(f):
        m = next(msgs)
        r = reply_err(f, m)
        if m is None:
            del r["message"]
        return r
    assert run(prog, h, TOOLS).value == ["rejected: ", "rejected: <unrenderable rejection value>"]


def test_argument_validation():
    """C59, C133, C148, C149 and the other reasons: nothing sent, no id consumed."""
    prog = r'''
class F(float):
    pass
class Sneaky(dict):
    def items(self): return iter([])
    def keys(self): return iter([])
    def __iter__(self): return iter([])
    def __len__(self): return 0
cyc = []
cyc.append(cyc)
bad = [{1: "x"}, {"bad": float("inf")}, {"v": F(2.5)}, Sneaky(secret=[1, 2]), -0.0,
       2**53 + 1, {1, 2}, cyc, {"\ud83d\ude00": 1, "\U0001f600": 2}, b"x"]
out = []
for b in bad:
    try:
        await tools.echo(b)
    except RuntimeError as e:
        out.append(str(e))
out.append(await tools.echo({"ok": True}))
return out
'''
    res = run(prog, echo, TOOLS)
    p = "binding arguments must be lossless JSON (%s) at %s"
    key = "; dict keys must be text: use str(key)"
    assert res.value == [p % r for r in (
        ("non-string dict key (int)", "$" + key),
        ("non-finite float", '$["bad"]; NaN and infinity have no JSON form: return None or a string'),
        ("unsupported type (F)", '$["v"]'),
        ("unsupported type (Sneaky)", "$"), ("negative zero", "$"),
        ("integer not exactly representable as a double", "$; return str(n) to keep every digit"),
        ("unsupported type (set)", "$; a set has no JSON form: return sorted(list(...)) instead"),
        ("circular reference", "$[0]"),
        ("duplicate dict key after surrogate-pair combining",
         "$; two keys are the same text once surrogate pairs are combined: keep one"),
        ("unsupported type (bytes)", "$; decode bytes to text (b.decode()) or base64-encode them"))] + \
        [{"ok": True}]
    assert [(c["id"], c["args"]) for c in res.calls] == [(0, {"ok": True})]


def test_argument_rejection_uses_error_class():
    prog = ("try:\n"
            "    await tools.echo({1: 2})\n"
            "except ToolError as e:\n"
            "    return [str(e), e.tool]")
    res = run(prog, echo, [ns("tools", "echo", error_class=("ToolError", "tool"))])
    assert res.value == ["binding arguments must be lossless JSON (non-string dict key (int)) at $; "
                         "dict keys must be text: use str(key)", "echo"]


def test_lossless_arguments_on_the_wire():
    """C145, C136-style surrogates, canonical floats in arguments."""
    prog = ("v = await tools.echo([2**60, 1.0, 1e21, 'a\\ud800b', '\\ud83d\\ude00', 0.1])\n"
            "return [v[0] == 2**60, type(v[1]).__name__, v]")
    res = run(prog, echo, TOOLS)
    assert res.raw[1] == (b'{"type":"call","id":0,"global":"tools","name":"echo","args":'
                          b'[1152921504606846976,1,1e+21,"a\\ud800b","\xf0\x9f\x98\x80",0.1]}')
    assert res.value[0] is True
    assert res.value[1] == "int"


def test_deep_client_result():
    """C103: a 12 000-deep reply is decoded (iteratively) and reaches the program."""
    prog = ("v = await tools.deep({})\n"
            "d = 0\n"
            "while isinstance(v, list):\n"
            "    d += 1\n"
            "    v = v[0] if v else None\n"
            "return d")

    def h(f):
        return b'{"type":"reply","id":%d,"ok":true,"value":' % f["id"] + \
            b"[" * 12000 + b"]" * 12000 + b"}"
    assert run(prog, h, [ns("tools", "deep")]).value == 12000


def test_large_arguments_and_replies():
    """C106: arguments are not capped by maxValueBytes; big replies arrive intact."""
    prog = ("n = await tools.measure({'payload': 'B' * 204800})\n"
            "big = await tools.big({})\n"
            "return [n, len(big), big[:3]]")

    def h(f):
        if f["name"] == "measure":
            return reply_ok(f, len(f["args"]["payload"]))
        return reply_ok(f, "A" * (4 * MIB))
    res = run(prog, h, [ns("tools", "measure", "big")], maxValueBytes=4096)
    assert res.value == [204800, 4 * MIB, "AAA"]


def test_unknown_reply_ids_are_ignored():
    prog = "return await tools.echo(7)"

    def h(f):
        return (b'{"type":"reply","id":99,"ok":true,"value":1}\n'
                b'{"type":"something"}\n\n' +
                json.dumps(reply_ok(f, f["args"])).encode())
    assert run(prog, h, TOOLS).value == 7


def test_thread_loop_binding():
    """C142: a binding awaited on a worker thread's own event loop completes."""
    prog = ("import asyncio, threading\n"
            "box = {}\n"
            "def worker():\n"
            "    box['v'] = asyncio.run(tools.echo({'from': 'thread'}))\n"
            "t = threading.Thread(target=worker)\n"
            "t.start()\n"
            "while t.is_alive():\n"
            "    await asyncio.sleep(0.01)\n"
            "return box['v']")
    assert run(prog, echo, TOOLS).value == {"from": "thread"}


CLOSED_LOOP = """
import asyncio, threading
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
return await tools.release({})
"""


def closed_loop_handler():
    held = []

    def h(f):
        if f["name"] == "slow":
            held.append(f)
            return None
        return (json.dumps(reply_ok(held[0], "late")) + "\n" +
                json.dumps(reply_ok(f, "released"))).encode()
    return h


def test_late_reply_for_closed_thread_loop():
    """C143: the reply for a closed loop is dropped; the pump keeps running."""
    res = run(CLOSED_LOOP, closed_loop_handler(), [ns("tools", "slow", "release")])
    assert res.value == "released"


def test_program_always_sees_a_running_loop_when_it_uses_asyncio():
    """The body runs inside an event loop whenever it could tell (no await needed)."""
    prog = "import asyncio\nreturn asyncio.get_running_loop() is not None"
    assert run(prog).value is True
    prog = "import asyncio\ntry:\n    asyncio.run(tools.echo(1))\nexcept RuntimeError:\n" \
           "    return 'refused inside the running loop'"
    assert run(prog, echo, TOOLS).value == "refused inside the running loop"
    prog = "import sys\nreturn 'asyn' + 'cio' in sys.modules"
    assert run(prog).value is False            # and a plain program never loads it


def test_cancelled_call_still_frees_its_slot():
    prog = ("import asyncio\n"
            "try:\n"
            "    await asyncio.wait_for(tools.slow({}), 0.05)\n"
            "except asyncio.TimeoutError:\n"
            "    pass\n"
            "return await tools.echo('after')")
    held = []

    def h(f):
        if f["name"] == "slow":
            held.append(f)
            return None
        return (json.dumps(reply_ok(held[0], "late")) + "\n" +
                json.dumps(reply_ok(f, f["args"]))).encode()
    assert run(prog, h, [ns("tools", "slow", "echo")]).value == "after"


def test_call_slots_cap_at_1024():
    """C173/C174 (child side): never more than 1024 outstanding calls; the 1025th waits."""
    prog = ("import asyncio\n"
            "r = await asyncio.gather(*(tools.echo(i) for i in range(1100)))\n"
            "return [len(r), r[:3], r[-1]]")
    c = Child()
    c.boot(namespaces=TOOLS)
    deadline = time.monotonic() + 60
    calls = []
    acked = False
    while len(calls) < 1024:
        line = c.read_line(deadline)
        f = json.loads(line)
        if f["type"] == "boot-ack" and not acked:
            acked = True
            c.send({"type": "run", "program": prog})
        elif f["type"] == "call":
            calls.append(f)
    # with 1024 outstanding, nothing more may arrive
    try:
        c.read_line(time.monotonic() + 0.5)
        extra = True
    except TimeoutError:
        extra = False
    assert not extra, "a 1025th call was sent while 1024 were outstanding"
    assert [f["id"] for f in calls] == list(range(1024))
    # free slots one at a time: each reply lets exactly one more call out (FIFO)
    c.send(reply_ok(calls[0], calls[0]["args"]))
    f = json.loads(c.read_line(time.monotonic() + 30))
    assert f["type"] == "call" and f["id"] == 1024 and f["args"] == 1024
    calls.append(f)
    c.send_in_background([reply_ok(f, f["args"]) for f in calls[1:]])
    res = c.serve(echo, timeout=30)
    assert res.value == [1100, [0, 1, 2], 1099]
    ids = [f["id"] for f in calls] + [f["id"] for f in res.calls]
    assert ids == list(range(1100))


def test_return_with_outstanding_calls():
    """C174 (child side): returning while 1024 calls are outstanding succeeds."""
    prog = ("import asyncio\n"
            "tasks = [asyncio.create_task(tools.slow(i)) for i in range(1024)]\n"
            "await asyncio.sleep(0.2)\n"
            "return 'done'")
    res = run(prog, lambda f: None, [ns("tools", "slow")])
    assert res.value == "done"
    assert len(res.calls) == 1024


def test_threads_share_one_id_sequence():
    prog = ("import asyncio, threading\n"
            "out = []\n"
            "def worker(k):\n"
            "    out.append(asyncio.run(tools.echo(k)))\n"
            "ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]\n"
            "for t in ts: t.start()\n"
            "main = await asyncio.gather(*(tools.echo(100 + i) for i in range(20)))\n"
            "while any(t.is_alive() for t in ts):\n"
            "    await asyncio.sleep(0.01)\n"
            "return [sorted(out), main]")
    res = run(prog, echo, TOOLS)
    assert res.value == [[0, 1, 2, 3], list(range(100, 120))]
    assert sorted(c["id"] for c in res.calls) == list(range(24))
    assert [c["id"] for c in res.calls] == list(range(24))      # ids reach the wire in order


def test_awaiting_maps_no_extra_address_space():
    """C119 (child side)."""
    prog = ("def mapped():\n"
            "    total = 0\n"
            "    with open('/proc/self/maps') as f:\n"
            "        for line in f:\n"
            "            lo, hi = line.split()[0].split('-')\n"
            "            total += int(hi, 16) - int(lo, 16)\n"
            "    return total / 1048576\n"
            "before = mapped()\n"
            "v = await tools.echo({'ping': True})\n"
            "return {'echoed': v, 'delta': mapped() - before}")
    v = run(prog, echo, TOOLS, addressSpaceBytes=256 * MIB).value
    assert v["echoed"] == {"ping": True}
    assert v["delta"] < 8


def test_wide_arguments_in_bounded_memory():
    """C168 (child side): 6 000 000 members validated and framed under RLIMIT_AS 384 MiB."""
    res = run("return await tools.width([0] * 6_000_000)",
              lambda f: reply_ok(f, len(f["args"])), [ns("tools", "width")],
              addressSpaceBytes=384 * MIB, timeout=60)
    assert res.value == 6000000


def test_concurrent_large_replies():
    """C170 (child side): eight 4 MiB replies, in whatever order, reach their awaiters."""
    prog = ("import asyncio\n"
            "parts = await asyncio.gather(*(tools.chunk(i) for i in range(8)))\n"
            "return [sum(len(p) for p in parts), [p[0] for p in parts]]")
    held = []

    def h(f):
        held.append(f)
        if len(held) < 8:
            return None
        return b"\n".join(json.dumps(reply_ok(g, chr(65 + g["args"]) * (4 * MIB))).encode()
                          for g in reversed(held))
    res = run(prog, h, [ns("tools", "chunk")], timeout=60)
    assert res.value == [33554432, list("ABCDEFGH")]


def test_flushed_line_reaches_the_daemon_before_the_program_blocks():
    """C111/C161 (child side): a flushed partial line is on the wire at once."""
    prog = ("print('before hang', end='', flush=True)\n"
            "return await tools.echo('after')")
    seen = []

    def h(f):
        seen.append(f)
        return reply_ok(f, f["args"])
    res = run(prog, h, TOOLS)
    assert res.frames[1] == {"type": "log", "text": "before hang", "open": True}
    assert res.frames[2]["type"] == "call"
    assert res.logs == ["before hang"] and res.value == "after"


def test_program_reading_fd3_itself():
    """C178 (child side): a program that forges calls and reads fd 3 itself is not robbed."""
    prog = ("import os\n"
            "def call(i):\n"
            "    return b'{\"type\":\"call\",\"id\":%d,\"global\":\"tools\",\"name\":\"big\","
            "\"args\":{}}\\n' % i\n"
            "os.write(3, b''.join(call(i) for i in range(50)))\n"
            "lines = 0\n"
            "while lines < 50:\n"
            "    lines += os.read(3, 65536).count(b'\\n')\n"
            "return lines")

    def h(f):
        if f["name"] == "big":
            return reply_ok(f, "B" * 66560)
        return reply_ok(f, f["args"])
    res = run(prog, h, [ns("tools", "big", "echo")], timeout=60)
    assert res.value == 50


def test_driver_mode_async_constructs():
    """Async generators, async context managers and nested coroutines without asyncio."""
    prog = ("import contextlib\n"
            "async def gen(n):\n"
            "    for i in range(n):\n"
            "        yield await tools.echo(i)\n"
            "@contextlib.asynccontextmanager\n"
            "async def cm():\n"
            "    yield await tools.echo('entered')\n"
            "out = [x async for x in gen(3)]\n"
            "async with cm() as v:\n"
            "    out.append(v)\n"
            "try:\n"
            "    await tools.fail({})\n"
            "except RuntimeError as e:\n"
            "    out.append(str(e))\n"
            "import sys\n"
            "out.append('asyn' + 'cio' in sys.modules)\n"
            "return out")
    res = run(prog, wrap_or_fail, TOOLS)
    assert res.value == [{"echoed": 0}, {"echoed": 1}, {"echoed": 2}, {"echoed": "entered"},
                         "nope", False]


def test_driven_replies_in_any_pieces():
    """A driven call (no event loop) takes its reply whole however the reads cut it: in the
    daemon's layout in one read, split mid-line across reads, behind or ahead of other
    lines, or in another layout."""
    c = Child()
    prog = ("out = [await tools.echo(i) for i in range(5)]\n"
            "import sys\n"
            "out.append('asyn' + 'cio' in sys.modules)\n"
            "return out")

    def h(f):
        line = b'{"type":"reply","id":%d,"ok":true,"value":[%d]}' % (f["id"], f["args"])
        if f["id"] == 1:                      # split mid-line: the child reads twice
            c.outq.put(line[:30])
            time.sleep(0.05)
            c.outq.put(line[30:] + b"\n")
            return None
        if f["id"] == 2:                      # behind a stray reply and a blank line
            return b'{"type":"reply","id":99,"ok":true,"value":1}\n\n' + line
        if f["id"] == 3:                      # ahead of a line the child ignores
            return line + b'\n{"type":"reply","id":98,"ok":true,"value":1}'
        if f["id"] == 4:                      # another layout of the same reply
            return json.dumps({"value": [f["args"]], "ok": True, "id": f["id"],
                               "type": "reply"}).encode()
        return line
    res = run(prog, h, TOOLS, child=c)
    assert res.value == [[0], [1], [2], [3], [4], False]


def test_namespaces_share_one_class_and_keep_their_own_state():
    """Every namespace object is read-only, lists and names only its own declarations, and
    exposes no state of its own (the slot that holds it reads as undeclared)."""
    prog = ("out = [type(tools) is type(db), repr(tools), repr(db), dir(tools), dir(db)]\n"
            "for f in (lambda: setattr(tools, 'echo', 1), lambda: delattr(db, 'get'),\n"
            "          lambda: tools._ns, lambda: db.echo):\n"
            "    try:\n"
            "        f()\n"
            "    except AttributeError as e:\n"
            "        out.append(str(e))\n"
            "return out + [await db.get(2)]")
    res = run(prog, echo, [ns("tools", "echo"), ns("db", "get")])
    assert res.value == [
        True, "<binding namespace 'tools'>", "<binding namespace 'db'>", ["echo"], ["get"],
        "binding namespace 'tools' is read-only", "binding namespace 'db' is read-only",
        "tool '_ns' is not declared in namespace 'tools'",
        "tool 'echo' is not declared in namespace 'db'", 2]
    assert [(c["global"], c["name"]) for c in res.calls] == [("db", "get")]
