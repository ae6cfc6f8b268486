"""Client.connect against the real daemon in service mode (coderun-rpc serve)."""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from typing import Any, Tuple

import pytest

from coderun import Client, ConnectionLost, InvalidParams

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
    with pytest.raises(ValueError, match="must be unix:PATH or tcp:HOST:PORT"):
        await Client.connect("ws://localhost:1/x")
    with pytest.raises(ValueError, match="tcp: needs HOST:PORT"):
        await Client.connect("tcp:localhost")
