"""Transport tests against a scripted in-memory daemon: dispatch, bindings, cancellation,
connection loss. They need no built daemon."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from coderun import ClientClosed, ConnectionLost, InvalidParams, LogEvent

from fakedaemon import FakeDaemon, aborted, ok


def call(rid: int, run_id: int, fn: str, args: Any, ns: str = "tools") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "binding/call",
        "params": {"runId": run_id, "namespace": ns, "function": fn, "args": args},
    }


async def test_run_round_trip_and_run_params() -> None:
    d = FakeDaemon()
    c = await d.connect()
    assert c.server_info["version"] == "fake"
    task = asyncio.ensure_future(
        c.run(
            "return 1",
            bindings={"tools": {"a": lambda x: x}},
            error_classes={"tools": ("ToolError", "tool")},
            limits={"maxWallMs": 1000},
        )
    )
    req = await d.recv()
    assert req["method"] == "run"
    assert req["params"] == {
        "program": "return 1",
        "bindings": [
            {"global": "tools", "functions": ["a"], "errorClass": {"name": "ToolError", "memberNameProperty": "tool"}}
        ],
        "limits": {"maxWallMs": 1000},
    }
    d.result(req["id"], ok(1, ["hi"]))
    r = await task
    assert r.ok and r.value == 1 and r.logs == ["hi"]


async def test_sync_async_raising_and_lossy_bindings() -> None:
    d = FakeDaemon()
    c = await d.connect()
    thread_names: list[str] = []

    def sync_fn(args):
        thread_names.append(threading.current_thread().name)
        return {"echo": args}

    async def async_fn(args):
        await asyncio.sleep(0.01)
        return [args, args]

    def raising(args):
        raise KeyError("missing")  # str(KeyError) is the repr of its argument

    async def araising(args):
        raise RuntimeError("async boom")

    tools = {"s": sync_fn, "a": async_fn, "r": raising, "ar": araising, "nan": lambda _: math.nan}
    task = asyncio.ensure_future(c.run("...", bindings={"tools": tools}))
    run = await d.recv()
    rid = run["id"]
    d.send(call(100, rid, "s", {"q": 1}))
    d.send(call(101, rid, "a", 2))
    d.send(call(102, rid, "r", None))
    d.send(call(103, rid, "ar", None))
    d.send(call(104, rid, "nan", None))
    d.send(call(105, rid, "undeclared", None))
    answers = {}
    for _ in range(6):
        m = await d.recv()
        answers[m["id"]] = m
    assert answers[100]["result"] == {"echo": {"q": 1}}
    assert thread_names and thread_names[0] != threading.main_thread().name
    assert answers[101]["result"] == [2, 2]
    assert answers[102]["error"]["message"] == "missing"  # a KeyError's key, once
    assert answers[103]["error"]["message"] == "async boom"
    assert answers[104]["error"]["message"].startswith("binding resolution must be lossless JSON")
    assert answers[105]["error"]["code"] == -32601
    d.result(rid, ok(None))
    assert (await task).has_value


async def test_binding_args_with_duplicate_keys_get_an_error_answer() -> None:
    d = FakeDaemon()
    c = await d.connect()
    task = asyncio.ensure_future(c.run("...", bindings={"tools": {"f": lambda a: a}}))
    run = await d.recv()
    d.send_raw(
        b'{"jsonrpc":"2.0","id":7,"method":"binding/call","params":{"runId":%d,"namespace":"tools",'
        b'"function":"f","args":{"k":1,"k":2}}}' % run["id"]
    )
    ans = await d.recv()
    assert ans["id"] == 7 and "duplicate object key" in ans["error"]["message"]
    d.result(run["id"], ok(0))
    await task


async def test_daemon_cancel_request_cancels_the_binding_task() -> None:
    d = FakeDaemon()
    c = await d.connect()
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow(args):
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return None

    task = asyncio.ensure_future(c.run("...", bindings={"tools": {"slow": slow}}))
    run = await d.recv()
    d.send(call(50, run["id"], "slow", None))
    await asyncio.wait_for(started.wait(), 5)
    d.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 50}})
    await asyncio.wait_for(cancelled.wait(), 5)
    d.result(run["id"], ok(1))
    await task
    with pytest.raises(asyncio.TimeoutError):
        await d.recv(timeout=0.1)  # no answer is sent for a cancelled call


async def test_binding_cancelled_by_someone_else_is_answered() -> None:
    d = FakeDaemon()
    c = await d.connect()

    async def self_cancel(args):
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # a Task.cancel that came from neither the daemon nor the client
        await asyncio.sleep(30)

    task = asyncio.ensure_future(c.run("...", bindings={"tools": {"f": self_cancel}}))
    run = await d.recv()
    d.send(call(60, run["id"], "f", None))
    ans = await d.recv()
    assert ans["id"] == 60 and ans["error"]["message"] == "binding was cancelled"
    assert ans["error"]["data"] == {"type": "CancelledError"}
    d.result(run["id"], ok(None))
    await task


_STOP_SCRIPT = """
import asyncio, json, sys
from fakedaemon import FakeDaemon

exc = {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit}[sys.argv[1]]
daemons = []

async def stop(args):
    raise exc("stop")

async def main():
    d = FakeDaemon()  # made in the loop: its StreamReader belongs to it
    daemons.append(d)
    c = await d.connect()
    await c.submit("...", bindings={"tools": {"stop": stop}})
    run = await d.recv()
    params = {"runId": run["id"], "namespace": "tools", "function": "stop", "args": None}
    d.send({"jsonrpc": "2.0", "id": 70, "method": "binding/call", "params": params})
    await asyncio.sleep(5)  # the binding's exception ends the loop long before this

try:
    asyncio.run(main())
    print(json.dumps({"escaped": None}))
except BaseException as e:
    print(json.dumps({"escaped": type(e).__name__}))
while not daemons[0].writer.inbox.empty():
    print(json.dumps(daemons[0].writer.inbox.get_nowait()))
"""


@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "SystemExit"])
def test_keyboard_interrupt_and_system_exit_are_answered_then_propagate(exc: str) -> None:
    # In a subprocess: on CPython 3.11.7 a KeyboardInterrupt or SystemExit leaving an asyncio
    # task leaks the interpreter's C recursion counter, and ast.parse then fails in that process.
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parent / "src"), str(here)])}
    proc = subprocess.run(
        [sys.executable, "-c", _STOP_SCRIPT, exc], env=env, capture_output=True, text=True, timeout=30
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines and lines[0] == {"escaped": exc}, proc.stdout + proc.stderr
    answers = [m for m in lines[1:] if isinstance(m, dict) and m.get("id") == 70]
    assert answers and answers[0]["error"]["message"] == f"binding raised {exc}: stop", proc.stdout


async def test_cancelling_the_task_sends_cancel_request_and_reraises() -> None:
    d = FakeDaemon()
    c = await d.connect()
    task = asyncio.ensure_future(c.run("while True: pass"))
    run = await d.recv()
    task.cancel()
    cancel = await d.recv()
    assert cancel == {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": run["id"]}}
    assert not task.done()  # it waits for the abort answer
    d.result(run["id"], aborted())
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_cancel_gives_up_waiting_after_the_grace() -> None:
    d = FakeDaemon()
    c = await d.connect(cancel_grace=0.2)
    task = asyncio.ensure_future(c.run("..."))
    await d.recv()
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - t0 < 2


async def test_handle_cancel_returns_the_abort_result() -> None:
    d = FakeDaemon()
    c = await d.connect()
    handle = await c.submit("...")
    run = await d.recv()
    assert handle.id == run["id"]
    assert handle.cancel()
    assert (await d.recv())["method"] == "$/cancelRequest"
    d.result(run["id"], aborted(["so far"]))
    r = await handle
    assert r.error is not None and r.error.kind == "abort" and r.logs == ["so far"]
    assert not handle.cancel()


async def test_connection_loss_fails_every_pending_call_at_once() -> None:
    d = FakeDaemon()
    c = await d.connect()
    tasks = [asyncio.ensure_future(c.run(f"return {i}")) for i in range(5)]
    for _ in range(5):
        await d.recv()
    d.die()
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
    assert all(isinstance(r, ConnectionLost) for r in results)
    assert c.closed
    with pytest.raises(ConnectionLost):
        await c.run("return 1")


async def test_connection_loss_cancels_running_bindings() -> None:
    d = FakeDaemon()
    c = await d.connect()
    cancelled = asyncio.Event()

    async def hang(args):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.ensure_future(c.run("...", bindings={"t": {"hang": hang}}))
    run = await d.recv()
    d.send(call(1, run["id"], "hang", None, ns="t"))
    await asyncio.sleep(0.05)
    d.die()
    with pytest.raises(ConnectionLost):
        await task
    await asyncio.wait_for(cancelled.wait(), 5)


async def test_rpc_errors_are_typed() -> None:
    d = FakeDaemon()
    c = await d.connect()
    task = asyncio.ensure_future(c.run("x"))
    run = await d.recv()
    d.send({"jsonrpc": "2.0", "id": run["id"], "error": {"code": -32602, "message": "program must be a string"}})
    with pytest.raises(InvalidParams) as info:
        await task
    assert info.value.message == "program must be a string"


async def test_streaming_callbacks_in_order_sync_and_async() -> None:
    d = FakeDaemon()
    c = await d.connect()
    seen: list[tuple[int, str, bool]] = []

    async def on_log(ev: LogEvent) -> None:
        await asyncio.sleep(0.01 * (3 - ev.index))  # later events finish sooner
        seen.append((ev.index, ev.text, ev.continued))

    task = asyncio.ensure_future(c.run("...", on_log=on_log))
    run = await d.recv()
    assert run["params"]["stream"] is True
    for i, text in enumerate(["a", "b", "c"]):
        d.send({"jsonrpc": "2.0", "method": "run/log", "params": {"runId": run["id"], "index": i, "text": text, "continued": False}})
    d.send({"jsonrpc": "2.0", "method": "run/log", "params": {"runId": run["id"], "index": 2, "text": "+", "continued": True}})
    d.result(run["id"], ok(None, ["a", "b", "c+"]))
    r = await task
    assert seen == [(0, "a", False), (1, "b", False), (2, "c", False), (2, "+", True)]
    assert r.logs == ["a", "b", "c+"]


async def test_close_sends_shutdown_and_exit() -> None:
    d = FakeDaemon()
    c = await d.connect()
    closing = asyncio.ensure_future(c.close())
    sd = await d.recv()
    assert sd["method"] == "shutdown"
    d.result(sd["id"], None)
    assert (await d.recv())["method"] == "exit"
    d.die()
    await asyncio.wait_for(closing, 5)
    assert d.writer.closed
    await c.close()  # idempotent
    with pytest.raises(ClientClosed):
        await c.run("return 1")


async def test_close_never_hangs_on_a_silent_daemon() -> None:
    d = FakeDaemon()
    c = await d.connect()
    t0 = time.monotonic()
    await asyncio.wait_for(c.close(shutdown_timeout=0.3), 5)
    assert time.monotonic() - t0 < 3


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"program": 5}, TypeError),
        ({"program": "x", "bindings": [1]}, TypeError),
        ({"program": "x", "bindings": {"t": [1]}}, TypeError),
        ({"program": "x", "bindings": {"t": {"f": 3}}}, TypeError),
        ({"program": "x", "bindings": {1: {}}}, TypeError),
        ({"program": "x", "bindings": {"t": {}}, "error_classes": {"u": ("E", "m")}}, ValueError),
        ({"program": "x", "bindings": {"t": {}}, "error_classes": {"t": "E"}}, TypeError),
        ({"program": "x", "bindings": {"t": {}}, "error_classes": {"t": ("E", 1)}}, TypeError),
        ({"program": "x", "limits": 5}, TypeError),
        ({"program": "x", "limits": {"maxWallMs": math.nan}}, ValueError),
        ({"program": "x", "on_log": "print"}, TypeError),
    ],
)
async def test_bad_api_arguments_raise_before_sending(kwargs: dict[str, Any], exc: type[Exception]) -> None:
    d = FakeDaemon()
    c = await d.connect()
    with pytest.raises(exc):
        await c.run(**kwargs)
    with pytest.raises(asyncio.TimeoutError):
        await d.recv(timeout=0.05)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is 3.11+")
async def test_asyncio_timeout_cancels_the_run_and_raises_timeout_error() -> None:
    d = FakeDaemon()
    c = await d.connect()

    async def answer_cancel() -> None:
        run = await d.recv()
        cancel = await d.recv()
        assert cancel["params"] == {"id": run["id"]}
        d.result(run["id"], aborted())

    helper = asyncio.ensure_future(answer_cancel())
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):  # type: ignore[attr-defined]
            await c.run("while True: pass")
    await asyncio.wait_for(helper, 5)
