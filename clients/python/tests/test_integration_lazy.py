"""The sync-describing adapters (LangChain, OpenAI Agents) start no daemon when a tool is made:
with the default daemon the description comes from ``coderun-rpc describe``, equal to what a
running daemon answers, and the daemon starts at the first run."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from coderun import Client, InvalidParams, binding
from coderun.client import describe_without_daemon

from conftest import daemon_binary

pytestmark = pytest.mark.skipif(daemon_binary() is None, reason="daemon not built (make build)")


def daemon_children() -> list[int]:
    """This process's live children that run the daemon's binary."""
    binary = os.path.realpath(daemon_binary() or "")
    pids = []
    for task in Path("/proc/self/task").iterdir():
        pids += [int(p) for p in (task / "children").read_text().split()]
    return [p for p in pids if _exe(p) == binary]


def _exe(pid: int) -> str:
    try:
        return os.path.realpath(f"/proc/{pid}/exe")
    except OSError:
        return ""


@pytest.fixture
def default_daemon(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The default daemon is the built one (its children on this interpreter, which has
    matplotlib); the list counts Client.start's calls."""
    monkeypatch.setenv("CODERUN_RPC_BIN", daemon_binary() or "")
    monkeypatch.setenv("CODERUN_PYTHON_BIN", sys.executable)
    starts: list[int] = []
    real = Client.start

    async def counting(*args: Any, **kwargs: Any) -> Client:
        starts.append(1)
        return await real(*args, **kwargs)

    monkeypatch.setattr(Client, "start", counting)
    return starts


def check_lazy(make: Callable[..., Any], close: Callable[[Any], None], run_once: Callable[[Any], Any],
               tools: list[Any], starts: list[int]) -> None:
    """Making the tool starts no daemon; its description is the daemon's; the first run starts
    it; closing the tool ends it."""
    limits = {"maxWallMs": 20000, "cpuSeconds": 7}
    lazy = make(tools, limits=limits)
    try:
        assert starts == [] and daemon_children() == []  # C1297
        eager = make(tools, limits=limits, daemon=lambda: Client.start())
        try:
            assert starts == [1] and lazy.description == eager.description  # C1298
            assert "CPU 7 s, wall 20000 ms" in lazy.description
        finally:
            close(eager)
        run_once(lazy)
        assert starts == [1, 1] and len(daemon_children()) == 1
    finally:
        close(lazy)
    assert daemon_children() == []


def test_langchain_tool_starts_no_daemon_until_its_first_run(default_daemon: list[int]) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.tools import tool

    from coderun.integrations.langchain import close_code_tool, code_tool

    @tool
    def get_temperature(city: str) -> int:
        """The temperature in a city, in °C."""
        return {"Paris": 21}.get(city, 0)

    def run_once(t: Any) -> None:
        assert "21" in str(t.invoke({"program": "return await tools.get_temperature(city='Paris')"}))

    check_lazy(code_tool, close_code_tool, run_once, [get_temperature], default_daemon)


def test_openai_agents_tool_starts_no_daemon_until_its_first_run(default_daemon: list[int]) -> None:
    pytest.importorskip("agents")
    import asyncio
    import json

    from agents import function_tool
    from agents.tool_context import ToolContext

    from coderun.integrations.openai_agents import close_code_tool, code_tool

    @function_tool
    def get_temperature(city: str) -> int:
        """The temperature in a city, in °C."""
        return {"Paris": 21}.get(city, 0)

    def run_once(t: Any) -> None:
        args = json.dumps({"program": "return await tools.get_temperature(city='Paris')"})
        ctx = ToolContext(context=None, tool_name=t.name, tool_call_id="c1", tool_arguments=args)
        assert "21" in str(asyncio.run(t.on_invoke_tool(ctx, args)))

    check_lazy(code_tool, close_code_tool, run_once, [get_temperature], default_daemon)


async def test_describe_without_daemon_refuses_as_the_daemon_does(default_daemon: list[int]) -> None:
    """C1299: params the daemon refuses raise InvalidParams with the daemon's message, a bad
    configuration raises the daemon's start-up line, and no daemon is started."""
    bad = {"tools": {"bad": binding(lambda a: a, parameters={"type": "string"})}}
    client = await Client.start()
    try:
        with pytest.raises(InvalidParams) as served:
            await client.describe(bindings=bad)
    finally:
        await client.close()
    with pytest.raises(InvalidParams) as offline:
        await describe_without_daemon(bindings=bad)
    assert str(offline.value) == str(served.value)
    with pytest.raises(InvalidParams) as warned:  # the daemon's warnings come first on stderr
        await describe_without_daemon(bindings=bad, env={"CODERUN_MAX_WAL_MS": "5"})
    assert str(warned.value) == str(served.value)
    with pytest.raises(Exception, match="CODERUN_MAX_WALL_MS") as failed:
        await describe_without_daemon(env={"CODERUN_MAX_WALL_MS": "abc"})
    assert not isinstance(failed.value, InvalidParams)
    assert daemon_children() == []
