"""Persistent sessions against the real built daemon (CODERUN_RPC_BIN, or bin/coderun-rpc)."""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest

from coderun import Client, InvalidParams, RunResult, SessionClosed, SessionLimitReached, SessionNotOpen

from conftest import daemon_binary

BIN = daemon_binary()
pytestmark = pytest.mark.skipif(BIN is None, reason="daemon not built (make build)")


@asynccontextmanager
async def daemon(**env: str) -> AsyncIterator[Client]:
    """A daemon with a cap of 3 sessions."""
    c = await Client.start(BIN, env={"CODERUN_LOG_LEVEL": "warn", "CODERUN_MAX_SESSIONS": "3", **env})
    try:
        yield c
    finally:
        await c.close()


def needs_fork(c: Client) -> None:
    """Skip unless the daemon forks sessions in its tier (capabilities.sessions.fork)."""
    if not c.capabilities["sessions"].get("fork"):
        pytest.skip("the daemon cannot fork sessions in this tier")


def value(r: RunResult) -> Any:
    assert r.error is None, (r.error, r.logs)
    return r.value


def closed_event(c: Client, sid: str) -> "asyncio.Future[SessionClosed]":
    """The first ``session/closed`` for ``sid``."""
    fut: asyncio.Future[SessionClosed] = asyncio.get_running_loop().create_future()

    def seen(e: SessionClosed) -> None:
        if e.session_id == sid and not fut.done():
            fut.set_result(e)

    c.on_session_closed(seen)
    return fut


async def test_state_is_kept_and_result_session_counts_runs() -> None:
    async with daemon() as c:
        assert c.capabilities["sessions"]["max"] == 3
        async with c.session() as s:
            r = await s.run("import math\ndata = [i * i for i in range(10)]\ndef total():\n    return sum(data)")
            assert value(r) is None
            assert r.session is not None and (r.session.id, r.session.alive, r.session.runs) == (s.id, True, 1)
            r = await s.run("return total() + math.floor(2.5)")
            assert value(r) == 287 and r.session is not None and r.session.runs == 2
            r = await s.run("data.append(1)\n1/0")
            assert r.error is not None and r.error.kind == "exception"
            assert r.session is not None and r.session.alive
            assert value(await s.run("return len(data)")) == 11
        assert s.state == "closed"


async def test_bindings_are_per_run() -> None:
    async with daemon() as c, c.session() as s:
        r = await s.run("kept = tools.twice\nreturn await kept(21)", bindings={"tools": {"twice": lambda a: a * 2}})
        assert value(r) == 42
        r = await s.run("try:\n    await kept(1)\nexcept RuntimeError as e:\n    return str(e)")
        assert "belongs to a finished run" in value(r)


async def test_fork_copies_state_and_diverges() -> None:
    async with daemon() as c, c.session() as s:
        needs_fork(c)
        value(await s.run("x = [1, 2]"))
        async with await s.fork() as t:
            assert t.id != s.id
            assert value(await t.run("x.append(3)\nreturn x")) == [1, 2, 3]
            assert value(await s.run("x.append(4)\nreturn x")) == [1, 2, 4]
            assert value(await t.run("return x")) == [1, 2, 3]


async def test_closed_and_unknown_sessions_raise_session_not_open() -> None:
    async with daemon() as c:
        s = await c.open_session()
        await s.close()
        await s.close()
        with pytest.raises(SessionNotOpen) as e:
            await s.run("return 1")
        assert (e.value.session_id, e.value.state) == (s.id, "closed")
        with pytest.raises(SessionNotOpen) as e:
            await c.run("return 1", session_id=s.id)  # the daemon's own answer
        assert e.value.state == "closed"
        with pytest.raises(SessionNotOpen) as e:
            await c.run("return 1", session_id="no-such-session")
        assert e.value.state == "unknown"


async def test_session_child_killed_from_outside() -> None:
    async with daemon() as c:
        if c.capabilities.get("isolation") != "process":
            pytest.skip("the child's pid is in another PID namespace")
        s = await c.open_session()
        seen: list[SessionClosed] = []
        s.on_closed(seen.append)
        pid = value(await s.run("import os\nreturn os.getpid()"))
        closed = closed_event(c, s.id)
        os.kill(pid, signal.SIGKILL)
        event = await asyncio.wait_for(closed, 10)
        assert event.reason == "lost" and event.message
        assert seen == [event]
        assert s.state == "lost"
        with pytest.raises(SessionNotOpen) as e:
            await s.run("return 1")
        assert e.value.state == "lost" and s.id in str(e.value)
        assert value(await c.run("return 1")) == 1  # the daemon serves on


async def test_cancelling_a_queued_run_leaves_the_session_open() -> None:
    async with daemon() as c, c.session() as s:
        first = asyncio.ensure_future(s.run("import time\ntime.sleep(0.5)\nx = 1\nreturn 1"))
        await asyncio.sleep(0.05)
        queued = await c.submit("x = 2\nreturn 2", session_id=s.id)
        await asyncio.sleep(0.05)
        assert queued.cancel()
        r = await queued
        assert r.error is not None and r.error.kind == "abort"
        assert r.session is None or r.session.alive
        assert value(await first) == 1
        assert s.state == "open"
        assert value(await s.run("return x")) == 1  # the cancelled run never ran


async def test_a_timeout_ends_the_session() -> None:
    async with daemon() as c:
        s = await c.open_session()
        closed = closed_event(c, s.id)
        r = await s.run("while True:\n    pass", limits={"maxWallMs": 300})
        assert r.error is not None and r.error.kind == "timeout"
        assert r.session is not None and not r.session.alive
        assert s.state == "lost"
        assert (await asyncio.wait_for(closed, 10)).reason == "lost"


async def test_bad_params_and_the_cap() -> None:
    async with daemon() as c:
        with pytest.raises(InvalidParams, match="idleTimeoutMs"):
            await c.open_session(idle_timeout_ms=-1)
        async with c.session() as s:
            with pytest.raises(InvalidParams, match="addressSpaceMb"):
                await s.run("return 1", limits={"addressSpaceMb": 256})
            async with c.session() as a, c.session() as b:
                with pytest.raises(SessionLimitReached, match="3"):
                    await c.open_session()
                if c.capabilities["sessions"].get("fork"):
                    with pytest.raises(SessionLimitReached):
                        await a.fork()
                assert value(await b.run("return 1")) == 1


async def test_idle_and_shutdown_notifications() -> None:
    async with daemon() as c:
        s = await c.open_session(idle_timeout_ms=200)
        event = await asyncio.wait_for(closed_event(c, s.id), 10)
        assert event.reason == "idle" and s.state == "closed"
        t = await c.open_session()
        closed = closed_event(c, t.id)
    assert (await asyncio.wait_for(closed, 1)).reason == "shutdown"
    assert t.state != "open"
