"""`coderun-rpc mcp` driven by the official Python MCP SDK's client (PyPI `mcp`)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, AsyncIterator

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import daemon_binary


@contextlib.asynccontextmanager
async def session(config: Path, **env: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=daemon_binary(), args=["mcp", "--mcp-config", str(config)],
                                   env={**os.environ, **env})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            yield s


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def test_tool_list_carries_every_upstream_stub(mcp_config: Path) -> None:
    async with session(mcp_config) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == {"run_python", "close_python_session"}
        desc = tools["run_python"].description or ""
        for want in ("class Everything:", "async def echo(self, message: str)", "async def get_sum(self, a: float, b: float)",
                     "class TimeServer:", "async def get_current_time(self, timezone: str)", "everything: Everything", "time_server: TimeServer"):
            assert want in desc, want
        compile(desc[desc.index("# coderun-rpc"):], "<stubs>", "exec")  # the stubs are Python


async def test_run_calls_real_upstreams(mcp_config: Path) -> None:
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with session(mcp_config) as s:
        result = await s.call_tool("run_python", {"program": """
print("asking")
echo = await everything.echo(message="hello")
total = await everything["get-sum"](a=2, b=3)
same = await everything.get_sum(2, 3)
now = await time_server.get_current_time(timezone="UTC")
return [echo, total == same, now["timezone"]]
"""}, progress_callback=on_progress)
        assert not result.is_error, text(result)
        structured = result.structured_content
        assert structured["value"] == ["Echo: hello", True, "UTC"]
        assert structured["logs"] == ["asking"]
        assert structured["stats"]["bindingCalls"] == 4
        assert "asking" in text(result) and 'value: ["Echo: hello",true,"UTC"]' in text(result)
        assert any("asking" in p for p in progress), progress


async def test_failures_are_errors(mcp_config: Path) -> None:
    async with session(mcp_config) as s:
        result = await s.call_tool("run_python", {"program": """
try:
    await time_server.get_current_time(timezone="Nowhere/Bogus")
except McpToolError as e:
    return [e.tool, "Bogus" in str(e)]
"""})
        assert not result.is_error, text(result)
        assert result.structured_content["value"] == ["get_current_time", True]

        result = await s.call_tool("run_python", {"program": "1/0"})
        assert result.is_error and "ZeroDivisionError" in text(result)
        assert result.structured_content["error"]["kind"] == "exception"

        result = await s.call_tool("close_python_session", {"session": "notes"})
        assert result.is_error and 'session "notes" is not open' in text(result)
