"""Client.connect against the real daemon in service mode (coderun-rpc serve)."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
from typing import Any, Tuple

import pytest

from coderun import Client, ConnectionLost, InvalidParams, SessionLimitReached, SessionNotOpen

from conftest import daemon_binary

BIN = daemon_binary()
pytestmark = pytest.mark.skipif(BIN is None, reason="daemon not built (make build)")


async def serve(listen: str, **env: str) -> Tuple[asyncio.subprocess.Process, str]:
    """Start ``coderun-rpc serve --listen listen``; return it and the address it logs."""
    assert BIN is not None
    proc = await asyncio.create_subprocess_exec(
        BIN, "serve", "--listen", listen, env={**os.environ, **env}, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, "serve exited before serving"
        m = re.search(r"msg=serving listen=(\S+)", line)
        if m:
            return proc, m.group(1)


async def stop(proc: asyncio.subprocess.Process) -> None:
    proc.terminate()
    await asyncio.wait_for(proc.wait(), 30)


async def echo(args: Any) -> Any:
    return args


async def test_connect_unix_same_api_as_start() -> None:
    with tempfile.TemporaryDirectory() as d:
        proc, path = await serve(f"unix:{d}/s.sock")
        try:
            async with await Client.connect(f"unix:{path}") as c:
                assert c.server_info.get("name") == "coderun-rpc"
                r = await c.run('return await tools.echo({"n": 41})', bindings={"tools": {"echo": echo}})
                assert r.error is None and r.value == {"n": 41}
            async with await Client.connect(f"unix:{path}") as again:  # the daemon serves on
                assert (await again.run("return 2")).value == 2
                tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                assert (await again.run("return 3", traceparent=tp)).value == 3
                bad = await again.submit("return 4", traceparent="nope")
                with pytest.raises(InvalidParams, match="traceparent must be a W3C traceparent string"):
                    await bad.result()
        finally:
            await stop(proc)


async def test_connect_tcp_token() -> None:
    proc, hostport = await serve("tcp:127.0.0.1:0", CODERUN_AUTH_TOKEN="tok")
    try:
        async with await Client.connect(f"tcp:{hostport}", token="tok") as c:
            assert (await c.run("return 3")).value == 3
        with pytest.raises(ConnectionLost, match="refused the connection: authentication failed: wrong bearer token"):
            await Client.connect(f"tcp:{hostport}", token="bad")
    finally:
        await stop(proc)


async def test_connect_bad_address() -> None:
    with pytest.raises(ValueError, match="must be unix:PATH, tcp:HOST:PORT or ws://HOST:PORT/PATH"):
        await Client.connect("http://localhost:1/x")
    with pytest.raises(ValueError, match="tcp: needs HOST:PORT"):
        await Client.connect("tcp:localhost")


async def test_sessions_per_connection_unix() -> None:
    """Each connection owns its sessions: another's id is unknown to it, the cap counts both,
    and a closed connection's sessions are gone (its cap freed)."""
    with tempfile.TemporaryDirectory() as d:
        proc, path = await serve(f"unix:{d}/s.sock", CODERUN_MAX_SESSIONS="1")
        try:
            a = await Client.connect(f"unix:{path}")
            async with await Client.connect(f"unix:{path}") as b:
                assert b.capabilities["sessions"]["max"] == 1
                s = await a.open_session()
                assert (await s.run("x = 41\nreturn x + 1")).value == 42
                with pytest.raises(SessionNotOpen) as e:
                    await b.run("return x", session_id=s.id)
                assert e.value.state == "unknown" and e.value.session_id == s.id
                with pytest.raises(SessionLimitReached, match="CODERUN_MAX_SESSIONS"):
                    await b.open_session()
                await a.close()
                async with await b.session() as t:  # a's session closed with its connection
                    assert (await t.run("return globals().get('x')")).value is None
        finally:
            await stop(proc)


async def test_connect_ws_token_and_sessions() -> None:
    """ws:// has the same API as unix:: the token in the upgrade, bindings, sessions."""
    proc, hostport = await serve("ws://127.0.0.1:0/rpc", CODERUN_AUTH_TOKEN="tok")
    try:
        async with await Client.connect(f"ws://{hostport}/rpc", token="tok") as c:
            r = await c.run('return await tools.echo({"n": 41})', bindings={"tools": {"echo": echo}})
            assert r.error is None and r.value == {"n": 41}
            big = await c.run("return 'y' * 30000")  # a message of many WebSocket frames
            assert big.value == "y" * 30000
            async with await c.session() as s:
                await s.run("n = 1")
                assert (await s.run("n += 1\nreturn n")).value == 2
        with pytest.raises(ConnectionLost, match="refused the connection: authentication failed: wrong bearer token"):
            await Client.connect(f"ws://{hostport}/rpc", token="bad")
    finally:
        await stop(proc)


async def test_connect_ws_without_websockets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the optional package, ws:// fails with an ImportError naming the extra."""
    monkeypatch.setitem(sys.modules, "websockets.asyncio.client", None)  # as if not installed
    with pytest.raises(ImportError, match=re.escape("pip install 'coderun[ws]'")):
        await Client.connect("ws://127.0.0.1:1/rpc")
