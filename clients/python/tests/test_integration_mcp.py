"""``mcp_config``: the daemon started with upstream MCP servers (docs/mcp.md), here the real
mcp-server-time from the test environment."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from coderun import Bindings, Client, InvalidParams, McpBinding

from conftest import daemon_binary
from test_integration import BIN, ENV

pytestmark = pytest.mark.skipif(daemon_binary() is None, reason="daemon not built (make build)")

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"
SERVERS = {"mcpServers": {"clock": {"command": str(TIME_SERVER), "args": ["--local-timezone", "UTC"]}}}
PARAMS = {"program": 'now = await clock.get_current_time(timezone="UTC")\nreturn now["timezone"]',
          "bindings": [{"global": "clock", "mcp": "clock"}]}


@pytest.fixture(autouse=True)
def needs_time_server() -> None:
    if not TIME_SERVER.exists():
        pytest.skip("mcp-server-time is not installed (make deps)")


async def test_mcp_config_mapping_is_written_then_removed(tmp_path: Path) -> None:
    async with await Client.start(BIN, env=ENV, mcp_config=SERVERS) as c:
        assert list(tmp_path.glob("mcp-config-*")) == []  # read at start-up, then removed
        r = await c.request("run", PARAMS)
        assert r["value"] == "UTC" and r["stats"]["bindingCalls"] == 1


async def test_mcp_config_path(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(SERVERS))
    async with await Client.start(BIN, env=ENV, mcp_config=path) as c:
        r = await c.request("run", PARAMS)
        assert r["value"] == "UTC"


async def test_mcp_binding_declared_in_bindings_next_to_host_functions() -> None:
    """Catalogue C606."""
    calls: list[str] = []

    def note(text: str) -> str:
        calls.append(text)
        return text.upper()

    bindings: Bindings = [{"global": "clock", "mcp": "clock"}, {"global": "host", "functions": {"note": note}}]
    async with await Client.start(BIN, env=ENV, mcp_config=SERVERS) as c:
        r = await c.run('now = await clock.get_current_time(timezone="UTC")\n'
                        'return [now["timezone"], await host.note(text="seen")]', bindings=bindings)
        assert r.error is None, r.error
        assert r.value == ["UTC", "SEEN"] and calls == ["seen"] and r.stats.binding_calls == 2
        stubs = await c.describe(bindings=bindings)
        assert "async def get_current_time(self, timezone: str)" in stubs and "async def note(self, text: str)" in stubs


async def test_mcp_binding_error_class_and_session_run() -> None:
    """Catalogue C606."""
    bindings: Bindings = [McpBinding({"global": "clock", "mcp": "clock"})]
    async with await Client.start(BIN, env=ENV, mcp_config=SERVERS) as c:
        r = await c.run('try:\n    await clock.get_current_time(timezone="Nowhere/Bogus")\n'
                        'except ClockError as e:\n    return type(e).__name__',
                        bindings=bindings, error_classes={"clock": ("ClockError", "tool")})
        assert r.value == "ClockError", r.error
        async with c.session() as s:
            r = await s.run('return (await clock.get_current_time(timezone="UTC"))["timezone"]', bindings=bindings)
            assert r.value == "UTC", r.error


async def test_mcp_binding_refusals_name_the_entry() -> None:
    """Catalogue C607."""
    async with await Client.start(BIN, env=ENV, mcp_config=SERVERS) as c:
        with pytest.raises(InvalidParams, match=r'bindings\[0\]\.mcp "nope" is not a configured MCP server'):
            await c.run("return 1", bindings=[{"global": "x", "mcp": "nope"}])
        for bad, message in [
            ([{"global": "x", "mcp": ""}], r"bindings\[0\]\['mcp'\] must be the key of a configured MCP server"),
            ([{"global": "x", "mcp": "clock", "functions": {}}], r"bindings\[0\] must be \{'global': name"),
            ([{"mcp": "clock"}], r"bindings\[0\] must be \{'global': name"),
            ("clock", "bindings must be a mapping"),
        ]:
            with pytest.raises(TypeError, match=message):
                await c.run("return 1", bindings=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="bindings declare namespace 'x' twice"):
            await c.run("return 1", bindings=[{"global": "x", "mcp": "clock"}, {"global": "x", "functions": {}}])
