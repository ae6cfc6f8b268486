"""Integration tests against the real built daemon (CODERUN_RPC_BIN, or bin/coderun-rpc)."""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
from typing import Any, AsyncIterator

import pytest

from coderun import Client, ConnectionLost, InvalidParams, LogEvent, QueueFull, RunResult

from conftest import daemon_binary

BIN = daemon_binary()
pytestmark = pytest.mark.skipif(BIN is None, reason="daemon not built (make build)")

ENV = {"CODERUN_LOG_LEVEL": "warn"}
LOSSLESS = "binding resolution must be lossless JSON"


async def start(**env: str) -> Client:
    return await Client.start(BIN, env={**ENV, **env})


def value(r: RunResult) -> Any:
    assert r.error is None, r.error
    assert r.has_value
    return r.value


async def test_round_trip_logs_value_stats() -> None:
    async with await start() as c:
        assert c.server_info.get("name") == "coderun-rpc"
        assert "python" in c.capabilities.get("languages", [])
        r = await c.run('print("hello")\nimport sys\nprint("err", file=sys.stderr)\nreturn {"a": [1, 2.5, None, True], "s": "é😀"}')
        assert value(r) == {"a": [1, 2.5, None, True], "s": "é😀"}
        assert r.logs == ["hello", "err"]
        assert r.stats.wall_ms >= 0 and r.stats.binding_calls == 0 and r.stats.log_bytes > 0
        r = await c.run("x = 1")
        assert r.has_value and r.value is None


async def test_sync_and_async_bindings() -> None:
    def add(args):
        return args["a"] + args["b"]

    async def upper(args):
        await asyncio.sleep(0.01)
        return str(args).upper()

    async with await start() as c:
        r = await c.run(
            "a = await tools.add({'a': 2, 'b': 3})\n"
            "b = await tools.upper('abc')\n"
            "c = await tools['my-tool'](q='x')\n"
            "d = await tools.big(2**60)\n"
            "return [a, b, c, d, d == 2**60]",
            bindings={"tools": {"add": add, "upper": upper, "my-tool": lambda a: a, "big": lambda n: n}},
        )
        assert value(r) == [5, "ABC", {"q": "x"}, 2**60, True]
        assert r.stats.binding_calls == 4


async def test_binding_raising_keeps_its_builtin_type() -> None:
    class MissingUser(KeyError):
        pass

    class ApiDown(Exception):
        pass

    def fail(args):
        raise ValueError("nope")

    async def afail(args):
        raise LookupError("")

    def missing(args):
        raise MissingUser("user_id")

    def refused(args):
        raise ConnectionRefusedError(111, "Connection refused")

    def down(args):
        raise ApiDown("503")

    async with await start() as c:
        r = await c.run(
            "out = []\n"
            "for f in (tools.fail, tools.afail, tools.missing, tools.refused, tools.down):\n"
            "    try:\n"
            "        await f({})\n"
            "    except Exception as e:\n"
            "        out.append([type(e).__name__, str(e)])\n"
            "return out",
            bindings={"tools": {"fail": fail, "afail": afail, "missing": missing, "refused": refused, "down": down}},
        )
        assert value(r) == [["ValueError", "nope"], ["LookupError", ""], ["KeyError", "'user_id'"],
                            ["ConnectionRefusedError", "[Errno 111] Connection refused"], ["RuntimeError", "503"]]


CATCH_EACH = (
    "out = []\n"
    "for name in NAMES:\n"
    "    try:\n"
    "        await tools[name]({})\n"
    "    except RuntimeError as e:\n"
    "        out.append([type(e).__name__, str(e)])\n"
    "return out"
)


async def _run_promptly(c: Client, bindings: dict[str, Any]) -> RunResult:
    """Run CATCH_EACH over every binding, with a wall clock a hanging call would hit."""
    program = CATCH_EACH.replace("NAMES", repr(list(bindings)))
    t0 = time.monotonic()
    r = await c.run(program, bindings={"tools": bindings}, limits={"maxWallMs": 15000})
    assert time.monotonic() - t0 < 8, r.error
    return r


async def test_binding_raising_cancelled_error_is_answered() -> None:
    async def cancelled(args):
        raise asyncio.CancelledError()

    async def cancelled_with_message(args):
        await asyncio.sleep(0)
        raise asyncio.CancelledError("quota exhausted")

    def cancelled_in_thread(args):
        raise asyncio.CancelledError()

    async with await start() as c:
        r = await _run_promptly(c, {"a": cancelled, "m": cancelled_with_message, "s": cancelled_in_thread})
        assert value(r) == [
            ["RuntimeError", "binding was cancelled"],
            ["RuntimeError", "binding was cancelled: quota exhausted"],
            ["RuntimeError", "binding was cancelled"],
        ]
        assert value(await c.run("return 7")) == 7  # the connection is fine afterwards


class Halt(BaseException):
    """A BaseException that is not an Exception, as some frameworks define."""


async def test_binding_raising_a_base_exception_is_answered() -> None:
    async def halt(args):
        raise Halt("stop here")

    def halt_in_thread(args):
        raise Halt()

    async with await start() as c:
        r = await _run_promptly(c, {"a": halt, "s": halt_in_thread})
        assert value(r) == [["RuntimeError", "binding raised Halt: stop here"], ["RuntimeError", "binding raised Halt"]]
        # uncaught in the program, with an error class: an exception result carrying the message
        r = await c.run("await tools.a(1)", bindings={"tools": {"a": halt}}, error_classes={"tools": ("ToolError", "tool")})
        assert r.error is not None and r.error.kind == "exception" and r.error.exception_type == "ToolError"
        assert "binding raised Halt: stop here" in r.error.message


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text")


async def test_binding_exception_whose_str_raises_is_answered() -> None:
    async def unprintable(args):
        raise Unprintable()

    async def unprintable_base(args):
        raise asyncio.CancelledError(Unprintable())

    async with await start() as c:
        r = await _run_promptly(c, {"a": unprintable, "b": unprintable_base})
        assert value(r) == [
            ["RuntimeError", "<Unprintable: str() failed>"],
            ["RuntimeError", "binding was cancelled: <CancelledError: str() failed>"],
        ]


async def test_error_class_mapping() -> None:
    def fail(args):
        raise RuntimeError("no results for " + args["q"])

    async with await start() as c:
        prog = (
            "try:\n"
            "    await tools.search({'q': 'cats'})\n"
            "except ToolError as e:\n"
            "    return [type(e).__name__, e.tool, str(e), isinstance(e, Exception)]"
        )
        r = await c.run(prog, bindings={"tools": {"search": fail}}, error_classes={"tools": ("ToolError", "tool")})
        assert value(r) == ["ToolError", "search", "no results for cats", True]
        # uncaught: an exception result naming the class and the program line
        r = await c.run(
            "x = 1\nawait tools.search({'q': 'dogs'})",
            bindings={"tools": {"search": fail}},
            error_classes={"tools": ("ToolError", "tool")},
        )
        assert r.error is not None and r.error.kind == "exception"
        assert r.error.exception_type == "ToolError" and r.error.line == 2
        assert "no results for dogs" in r.error.message


async def test_concurrent_runs_with_bindings() -> None:
    async def work(args):
        await asyncio.sleep(0.02)
        return args["i"] * 10

    async with await start() as c:
        prog = "a = await tools.work({'i': I})\nb = await tools.work({'i': I + 1})\nprint(a)\nreturn a + b"
        runs = [c.run(prog.replace("I", str(i)), bindings={"tools": {"work": work}}) for i in range(20)]
        results = await asyncio.wait_for(asyncio.gather(*runs), 50)
        for i, r in enumerate(results):
            assert value(r) == i * 10 + (i + 1) * 10
            assert r.logs == [str(i * 10)]


STARTED_THEN_WAIT = "import asyncio\nprint('started', flush=True)\nawait asyncio.sleep(30)\nreturn 'late'"


async def _started(c: Client, program: str = STARTED_THEN_WAIT, **kw: Any) -> tuple["asyncio.Task[RunResult]", asyncio.Event]:
    seen = asyncio.Event()

    def on_log(ev: LogEvent) -> None:
        if ev.text == "started":
            seen.set()

    task = asyncio.ensure_future(c.run(program, on_log=on_log, **kw))
    await asyncio.wait_for(seen.wait(), 15)
    return task, seen


async def test_cancelling_the_task_aborts_the_run() -> None:
    async with await start() as c:
        task, _ = await _started(c)
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - t0 < 5
        assert value(await c.run("return 7")) == 7  # the daemon is fine afterwards


async def test_handle_cancel_returns_abort_result() -> None:
    async with await start() as c:
        seen = asyncio.Event()
        handle = await c.submit(STARTED_THEN_WAIT, on_log=lambda ev: seen.set())
        await asyncio.wait_for(seen.wait(), 15)
        handle.cancel()
        r = await asyncio.wait_for(handle.result(), 10)
        assert r.error is not None and r.error.kind == "abort"
        assert r.error.message == "run cancelled by the client"
        assert r.logs == ["started"] and not r.has_value


async def test_cancel_mid_binding_cancels_the_binding_task() -> None:
    entered, cancelled = asyncio.Event(), asyncio.Event()

    async def slow(args):
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with await start() as c:
        handle = await c.submit("return await tools.slow(1)", bindings={"tools": {"slow": slow}})
        await asyncio.wait_for(entered.wait(), 15)
        handle.cancel()
        r = await asyncio.wait_for(handle.result(), 10)
        assert r.error is not None and r.error.kind == "abort"
        await asyncio.wait_for(cancelled.wait(), 5)  # the daemon sent $/cancelRequest for the call


async def test_streaming_order_with_bindings() -> None:
    events: list[tuple[str, Any]] = []

    def note(args):
        events.append(("call", args))
        return None

    async with await start() as c:
        prog = (
            "for i in range(3):\n"
            "    print(f'line {i}', flush=True)\n"
            "    await tools.note(i)\n"
            "print('end')\n"
            "return 1"
        )
        r = await c.run(
            prog,
            bindings={"tools": {"note": note}},
            on_log=lambda ev: events.append(("log", ev.text)),
        )
        assert value(r) == 1
        assert events == [
            ("log", "line 0"), ("call", 0),
            ("log", "line 1"), ("call", 1),
            ("log", "line 2"), ("call", 2),
            ("log", "end"),
        ]
        assert r.logs == ["line 0", "line 1", "line 2", "end"]


async def test_daemon_killed_mid_run_fails_pending_calls() -> None:
    c = await start()
    try:
        task, _ = await _started(c)
        other = asyncio.ensure_future(c.run("import asyncio\nawait asyncio.sleep(30)"))
        await asyncio.sleep(0.1)
        assert c.process is not None
        t0 = time.monotonic()
        c.process.kill()
        for t in (task, other):
            with pytest.raises(ConnectionLost):
                await asyncio.wait_for(t, 5)
        assert time.monotonic() - t0 < 3
        with pytest.raises(ConnectionLost):
            await c.run("return 1")
    finally:
        t1 = time.monotonic()
        await c.close()
        assert time.monotonic() - t1 < 5


async def test_close_aborts_live_runs() -> None:
    c = await start()
    task, _ = await _started(c)
    await asyncio.wait_for(c.close(), 15)
    r = await task
    assert r.error is not None and r.error.kind == "abort"
    assert r.error.message == "server is shutting down"
    assert c.process is not None and c.process.returncode == 0


async def test_bad_arguments() -> None:
    async with await start() as c:
        with pytest.raises(InvalidParams) as info:
            await c.run("return 1", bindings={"1bad": {"f": lambda a: a}})
        assert info.value.message == 'bindings[0].global "1bad" is not a usable Python identifier'
        with pytest.raises(InvalidParams) as info:
            await c.run("return 1", bindings={"tools": {}}, error_classes={"tools": ("ToolError", "name")})
        assert "reserved error member" in info.value.message
        with pytest.raises(InvalidParams):
            await c.run("return 1", limits={"maxWallMs": 0})
        with pytest.raises(InvalidParams):
            await c.run("return 1", limits={"noSuchLimit": 1})
        with pytest.raises(TypeError):
            await c.run(b"return 1")  # type: ignore[arg-type]
        assert value(await c.run("return 'still serving'")) == "still serving"


class Opaque:
    pass


async def test_lossy_binding_results_are_refused() -> None:
    cyc: list[Any] = []
    cyc.append(cyc)
    lossy: dict[str, Any] = {
        "nan": math.nan,
        "inf": math.inf,
        "negzero": -0.0,
        "bigint": 2**53 + 1,
        "intkey": {1: "x"},
        "aset": {1, 2},
        "obj": Opaque(),
        "cycle": cyc,
        "nested": {"ok": [1, {"deep": -math.inf}]},
    }
    tools = {name: (lambda v: lambda _a: v)(v) for name, v in lossy.items()}
    prog = (
        "out = {}\n"
        f"for name in {list(lossy)!r}:\n"
        "    try:\n"
        "        out[name] = ['ok', await tools[name]()]\n"
        "    except RuntimeError as e:\n"
        "        out[name] = str(e)\n"
        "return out"
    )
    async with await start() as c:
        out = value(await c.run(prog, bindings={"tools": tools}))
        for name in lossy:
            assert isinstance(out[name], str) and out[name].startswith(LOSSLESS), (name, out[name])


async def test_binding_result_over_the_inbound_cap() -> None:
    async with await start() as c:
        prog = (
            "try:\n"
            "    await tools.huge()\n"
            "except RuntimeError as e:\n"
            "    msg = str(e)\n"
            "return [msg, await tools.fine()]"
        )
        r = await c.run(prog, bindings={"tools": {"huge": lambda _a: "x" * 67108864, "fine": lambda _a: "ok"}})
        msg, fine = value(r)
        assert "67108864" in msg and fine == "ok"


async def test_failure_kinds() -> None:
    async with await start() as c:
        r = await c.run("x = 1\ny = 1 / 0")
        assert r.error is not None and r.error.kind == "exception"
        assert r.error.exception_type == "ZeroDivisionError" and r.error.line == 2
        r = await c.run("while True:\n    pass", limits={"maxWallMs": 500})
        assert r.error is not None and r.error.kind == "timeout" and r.error.budget == "wall"
        r = await c.run("return float('nan')")
        assert r.error is not None and r.error.kind == "invalid-output" and not r.has_value
        r = await c.run("return {'tags': {'a'}}")
        assert r.error is not None and r.error.path == '$["tags"]'
        assert r.error.hint == "a set has no JSON form: return sorted(list(...)) instead"


async def test_deep_values_both_ways() -> None:
    depth = 10_000
    deep: Any = 0
    for _ in range(depth):
        deep = [deep]

    async with await start() as c:
        r = await c.run(
            "v = await tools.deep()\nn = 0\nwhile isinstance(v, list):\n    v = v[0]\n    n += 1\nreturn n",
            bindings={"tools": {"deep": lambda _a: deep}},
        )
        assert value(r) == depth
        r = await c.run(f"v = 0\nfor _ in range({depth}):\n    v = [v]\nreturn v")
        back = value(r)
        n = 0
        while isinstance(back, list):
            back, n = back[0], n + 1
        assert n == depth


async def test_queue_full_and_cancelled_queued_run() -> None:
    async with await start(CODERUN_MAX_CONCURRENT_RUNS="1", CODERUN_MAX_QUEUED_RUNS="1", CODERUN_WARM_POOL="0") as c:
        first, _ = await _started(c)
        queued = await c.submit("return 'queued'")
        await asyncio.sleep(0.1)
        with pytest.raises(QueueFull) as info:
            await c.run("return 'third'")
        assert info.value.code == -32001 and info.value.message == "run queue is full"
        queued.cancel()
        r = await asyncio.wait_for(queued.result(), 10)
        assert r.error is not None and r.error.kind == "abort" and r.logs == []
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert value(await c.run("return 'after'")) == "after"


async def test_blocking_sync_binding_does_not_stall_other_runs() -> None:
    import threading

    gate = threading.Event()

    def blocking(args):
        gate.wait(20)
        return "released"

    async with await start() as c:
        slow = asyncio.ensure_future(c.run("return await tools.block()", bindings={"tools": {"block": blocking}}))
        fast = await asyncio.wait_for(c.run("return await tools.quick(5)", bindings={"tools": {"quick": lambda n: n + 1}}), 15)
        assert value(fast) == 6
        gate.set()
        assert value(await asyncio.wait_for(slow, 15)) == "released"


async def test_strings_survive_both_ways() -> None:
    samples = ["", "é中😀", "\ud800", "a\udfffb", "\x00\x1f\"\\", "\u2028"]
    async with await start() as c:
        r = await c.run(
            f"got = await tools.echo({samples!r})\nreturn [got == {samples!r}, got]",
            bindings={"tools": {"echo": lambda a: a}},
        )
        same, got = value(r)
        assert same is True and got == samples


async def test_streamed_continuations_merge_into_logs() -> None:
    events: list[LogEvent] = []
    async with await start() as c:
        r = await c.run(
            "import sys\nprint('abc', end='', flush=True)\nsys.stdout.flush()\nprint('def')\nprint('ghi')",
            on_log=events.append,
        )
        assert r.ok and r.logs == ["abcdef", "ghi"]
        merged: dict[int, str] = {}
        for ev in events:
            assert ev.run_id is not None
            merged[ev.index] = merged.get(ev.index, "") + ev.text if ev.continued else ev.text
        assert [merged[i] for i in sorted(merged)] == r.logs


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is 3.11+")
async def test_asyncio_timeout_stops_the_run() -> None:
    async with await start() as c:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):  # type: ignore[attr-defined]
                await c.run("while True:\n    pass")
        assert time.monotonic() - t0 < 6
        assert value(await c.run("return 1")) == 1


def test_example_runs() -> None:
    import subprocess
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "tools_demo.py"
    env = {**os.environ, "CODERUN_RPC_BIN": str(BIN), "CODERUN_LOG_LEVEL": "warn"}
    proc = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "value: {'hits': ['d2', 'd3'], 'chars': 132}" in out
    assert "fetch failed: no document 'd9'" in out
    assert "async def search(self, word: str) -> list[str]:" in out
    assert "refused before the host: tools.search" in out and "/word" in out
    assert "failure: exception ZeroDivisionError line 2" in out
    assert "cancelled via handle: abort ['working']" in out
    assert "cancelled via task: CancelledError" in out
