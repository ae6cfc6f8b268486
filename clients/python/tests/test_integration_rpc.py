"""Integration tests of the protocol surface of the real daemon (no program needs to run)."""

from __future__ import annotations

import os

import pytest

from coderun import Client, InvalidParams, InvalidRequest, MethodNotFound

from conftest import daemon_binary

BIN = daemon_binary()
pytestmark = pytest.mark.skipif(BIN is None, reason="daemon not built (make build)")


async def start() -> Client:
    return await Client.start(BIN, env={"CODERUN_LOG_LEVEL": "warn"})


async def test_initialize_result() -> None:
    async with await start() as c:
        assert c.server_info.get("name") == "coderun-rpc"
        caps = c.capabilities
        assert caps.get("languages") == ["python"]
        assert caps.get("isolation") in ("process", "sandbox")
        assert isinstance(caps.get("limits", {}).get("maxValueBytes"), int)
        with pytest.raises(InvalidRequest):
            await c.request("initialize", {})
        with pytest.raises(MethodNotFound):
            await c.request("no/such/method", {})
    assert c.process is not None and c.process.returncode == 0


async def test_refused_run_params_raise_invalid_params() -> None:
    async with await start() as c:
        cases = [
            ({"bindings": {"1bad": {"f": lambda a: a}}}, 'bindings[0].global "1bad" is not a usable Python identifier'),
            ({"bindings": {"class": {}}}, 'bindings[0].global "class" is not a usable Python identifier'),
            ({"bindings": {"console": {}}}, 'bindings[0].global "console" collides with a runtime-owned global'),
            (
                {"bindings": {"tools": {}}, "error_classes": {"tools": ("ToolError", "name")}},
                'bindings[0].errorClass.memberNameProperty "name" is a reserved error member and cannot be assigned',
            ),
            (
                {"bindings": {"tools": {}}, "error_classes": {"tools": ("tools", "tool")}},
                'bindings[0].errorClass.name "tools" collides with another injected global',
            ),
        ]
        for kwargs, message in cases:
            with pytest.raises(InvalidParams) as info:
                await c.run("return 1", **kwargs)  # type: ignore[arg-type]
            assert info.value.message == message
            assert info.value.code == -32602
        for limits in ({"maxWallMs": 0}, {"maxWallMs": -5}, {"maxWallMs": 1.5}, {"noSuchLimit": 1}):
            with pytest.raises(InvalidParams):
                await c.run("return 1", limits=limits)
        with pytest.raises(TypeError):
            await c.run(b"return 1")  # type: ignore[arg-type]


async def test_env_reaches_the_daemon() -> None:
    assert BIN is not None
    c = await Client.start(BIN, env={"CODERUN_LOG_LEVEL": "warn", "CODERUN_MAX_VALUE_BYTES": "4096"})
    async with c:
        assert c.capabilities["limits"]["maxValueBytes"] == 4096


async def test_invalid_configuration_fails_start_clearly() -> None:
    from coderun import ConnectionLost

    assert BIN is not None
    with pytest.raises(ConnectionLost, match='exited with code 2.*CODERUN_MAX_WALL_MS="soon": must be a positive integer'):
        await Client.start(BIN, env={"CODERUN_MAX_WALL_MS": "soon"})


def test_find_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    from coderun import DaemonNotFound, find_daemon

    assert BIN is not None
    assert find_daemon(BIN) == BIN
    monkeypatch.setenv("CODERUN_RPC_BIN", BIN)
    assert find_daemon() == BIN
    monkeypatch.setenv("CODERUN_RPC_BIN", "/nonexistent/coderun-rpc")
    with pytest.raises(DaemonNotFound):
        find_daemon()
    monkeypatch.delenv("CODERUN_RPC_BIN")
    monkeypatch.setenv("PATH", os.path.dirname(BIN))
    assert os.path.basename(BIN) != "coderun-rpc" or find_daemon() == BIN
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(DaemonNotFound):
        find_daemon()
