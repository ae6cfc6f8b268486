"""`coderun-rpc mcp` against real MCP peers: the official Python SDK's client, with the
reference upstream servers server-everything (npm, installed in this directory) and
mcp-server-time (PyPI, in the project's .venv)."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.append(str(REPO / "py" / "tests"))
from tmphygiene import nothing_left_in_tmp, own_tmpdir  # noqa: E402,F401 (fixtures)


def daemon_binary() -> str:
    for candidate in (os.environ.get("CODERUN_RPC_BIN"), str(REPO / "bin" / "coderun-rpc")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("no built daemon: run `make build` or set CODERUN_RPC_BIN")


EVERYTHING = HERE / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


def time_server() -> str:
    return str(Path(sys.executable).parent / "mcp-server-time")


@pytest.fixture
def mcp_config(tmp_path: Path) -> Path:
    """An mcpServers file with both real upstreams."""
    if not EVERYTHING.exists():
        pytest.fail("server-everything is missing: run `make deps` (npm ci in mcp/tests)")
    config = {"mcpServers": {
        "everything": {"command": "node", "args": [str(EVERYTHING), "stdio"]},
        "time-server": {"command": time_server(), "args": ["--local-timezone", "UTC"]},
    }}
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """async tests without a plugin: each coroutine test runs in a fresh event loop."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**args), 120))
    return True
