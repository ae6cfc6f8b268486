"""``mcp_config``: the daemon started with upstream MCP servers (docs/mcp.md), here the real
mcp-server-time from the test environment."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from coderun import Client

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
