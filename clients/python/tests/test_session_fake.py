"""Sessions against the scripted in-memory daemon: what the client sends, and what it makes of
the answers and of ``session/closed``. The real daemon's behaviour is pinned in
test_integration_session.py."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest

from coderun import ConnectionLost, SessionClosed, SessionLimitReached, SessionNotOpen

from fakedaemon import FakeDaemon, ok


def error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": err}


async def answer(d: FakeDaemon, method: str, result: Any) -> dict[str, Any]:
    """Receive the next request, check its method, answer it with ``result``; return it."""
    req = await d.recv()
    assert req["method"] == method, req
    d.result(req["id"], result)
    return req


async def opened(d: FakeDaemon, c: Any, sid: str = "s1", **kwargs: Any) -> Any:
    task = asyncio.ensure_future(c.open_session(**kwargs))
    await answer(d, "session/open", {"sessionId": sid})
    return await task


async def until(condition: Callable[[], bool]) -> None:
    """Yield to the loop until ``condition`` holds (bounded by the test's own timeout)."""
    while not condition():
        await asyncio.sleep(0.005)


async def refused(call: Awaitable[Any], sid: str, state: str, reason: str | None = None) -> None:
    """``call`` raises SessionNotOpen naming session ``sid``, its state and reason."""
    with pytest.raises(SessionNotOpen) as info:
        await call
    e = info.value
    assert e.code == -32004 and e.session_id == sid and e.state == state, (e, e.data)
    assert f"session {sid}" in str(e)
    if reason is not None:
        assert e.reason == reason


async def test_async_with_sends_open_run_fork_close() -> None:
    d = FakeDaemon()
    c = await d.connect()

    async def host() -> None:
        req = await answer(d, "session/open", {"sessionId": "s1"})
        assert req["params"] == {"limits": {"addressSpaceMb": 512}, "idleTimeoutMs": 5000}
        req = await d.recv()
        assert req["method"] == "run" and req["params"]["sessionId"] == "s1"
        d.result(req["id"], {**ok(7), "session": {"id": "s1", "alive": True, "runs": 1}})
        req = await answer(d, "session/fork", {"sessionId": "s2"})
        assert req["params"] == {"sessionId": "s1"}
        for sid in ("s2", "s1"):
            req = await answer(d, "session/close", None)
            assert req["params"] == {"sessionId": sid}

    script = asyncio.ensure_future(host())
    async with c.session(limits={"addressSpaceMb": 512}, idle_timeout_ms=5000) as s:
        r = await s.run("x = 7\nreturn x")
        assert r.value == 7 and r.session is not None
        assert (r.session.id, r.session.alive, r.session.runs) == ("s1", True, 1)
        async with await s.fork() as t:
            assert t.id == "s2" and t.state == "open"
    await script
    assert s.state == "closed" and t.state == "closed"
    await s.close()  # idempotent, no request
    await refused(s.run("return 1"), "s1", "closed")
    await refused(s.fork(), "s1", "closed")
    d.die()
    await c.close()


async def test_session_closed_reaches_session_and_client_callbacks() -> None:
    d = FakeDaemon()
    c = await d.connect()
    s = await opened(d, c)
    other = await opened(d, c, "s2")
    seen: list[tuple[str, SessionClosed]] = []
    s.on_closed(lambda e: seen.append(("session", e)))
    remove = c.on_session_closed(lambda e: seen.append(("client", e)))

    async def async_listener(e: SessionClosed) -> None:
        seen.append(("async", e))

    c.on_session_closed(async_listener)
    c.on_session_closed(lambda e: 1 / 0)  # a raising listener is logged, never breaks anything
    d.send({"jsonrpc": "2.0", "method": "session/closed",
            "params": {"sessionId": "s1", "reason": "lost", "message": "the session child was killed by SIGKILL"}})
    await until(lambda: len(seen) == 3)
    event = SessionClosed("s1", "lost", "the session child was killed by SIGKILL")
    assert seen == [("session", event), ("client", event), ("async", event)]
    assert s.state == "lost" and s.reason == event.message
    await refused(s.run("return 1"), "s1", "lost", event.message)
    await s.close()  # nothing to close: no request is sent
    remove()
    d.send({"jsonrpc": "2.0", "method": "session/closed",
            "params": {"sessionId": "s2", "reason": "idle", "message": "idle for 5000 ms"}})
    await until(lambda: len(seen) == 4)
    assert other.state == "closed" and other.reason == "idle"
    assert [who for who, _ in seen] == ["session", "client", "async", "async"]
    assert d.writer.inbox.empty()
    d.die()
    await c.close()


async def test_a_run_that_ends_the_session_marks_it_lost() -> None:
    d = FakeDaemon()
    c = await d.connect()
    s = await opened(d, c)
    task = asyncio.ensure_future(s.run("while True: pass"))
    req = await d.recv()
    d.result(req["id"], {"logs": [], "stats": {}, "error": {"kind": "timeout", "message": "wall", "budget": "wall"},
                         "session": {"id": "s1", "alive": False, "runs": 2, "reason": "timeout"}})
    r = await task
    assert r.error is not None and r.error.kind == "timeout"
    assert r.session is not None and not r.session.alive and r.session.reason == "timeout"
    assert s.state == "lost"
    await refused(s.run("return 1"), "s1", "lost", "timeout")
    d.die()
    await c.close()


async def test_daemon_errors_are_typed_and_update_the_session() -> None:
    d = FakeDaemon()
    c = await d.connect()
    s = await opened(d, c)
    task = asyncio.ensure_future(s.fork())
    req = await d.recv()
    d.send(error(req["id"], -32003, "session limit reached: CODERUN_MAX_SESSIONS is 16"))
    with pytest.raises(SessionLimitReached, match="CODERUN_MAX_SESSIONS"):
        await task
    assert s.state == "open"
    task = asyncio.ensure_future(s.run("return 1"))
    req = await d.recv()
    d.send(error(req["id"], -32004, "session s1 is lost", {"sessionId": "s1", "state": "lost", "reason": "worker-exit"}))
    await refused(task, "s1", "lost", "worker-exit")
    assert s.state == "lost" and s.reason == "worker-exit"
    d.die()
    await c.close()


async def test_the_daemon_going_away_marks_sessions_lost() -> None:
    d = FakeDaemon()
    c = await d.connect()
    s = await opened(d, c)
    d.die()
    await until(lambda: c.closed)
    with pytest.raises(ConnectionLost):
        await c.open_session()
    assert s.state == "lost"
    await refused(s.run("return 1"), "s1", "lost")
    await s.close()
    await c.close()


async def test_misuse_is_refused_before_sending() -> None:
    d = FakeDaemon()
    c = await d.connect()
    with pytest.raises(TypeError, match="idle_timeout_ms"):
        c.session(idle_timeout_ms="5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limits"):
        c.session(limits=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        c.on_session_closed(3)  # type: ignore[arg-type]
    assert d.writer.inbox.empty()
    d.die()
    await c.close()
