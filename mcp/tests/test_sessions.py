"""Named sessions of `coderun-rpc mcp` (docs/mcp.md §1.4) through the official Python MCP SDK's
client, with the real upstreams."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from test_python_sdk import session, text

PROCESS_TIER = {"CODERUN_ISOLATION": "process"}  # the session child's pid is the host's


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


async def test_state_files_and_upstreams_across_calls(mcp_config: Path) -> None:
    """Catalogue C600, C601."""
    async with session(mcp_config) as s:
        r = await s.call_tool("run_python", {"session": "work", "program": "import json\nseen = []\nreturn open('in/a.txt').read()",
                                             "files": [{"path": "in/a.txt", "text": "alpha"}]})
        assert not r.is_error and 'opened session "work"' in text(r) and 'value: "alpha"' in text(r), text(r)
        r = await s.call_tool("run_python", {"session": "work", "program": """
seen.append(await everything.echo(message="one"))
now = await time_server.get_current_time(timezone="UTC")
return [seen, json.dumps(now["timezone"]), open('in/a.txt').read()]
"""})
        assert not r.is_error, text(r)
        assert r.structured_content["value"] == [["Echo: one"], '"UTC"', "alpha"]
        assert r.structured_content["session"]["runs"] == 2 and "opened" not in text(r)

        r = await s.call_tool("close_python_session", {"session": "work"})
        assert not r.is_error and 'closed session "work"' in text(r)
        r = await s.call_tool("close_python_session", {"session": "work"})
        assert r.is_error and 'session "work" is not open' in text(r)
        r = await s.call_tool("run_python", {"session": "work", "program": "return 'seen' in globals()"})
        assert not r.is_error and 'opened session "work"' in text(r) and "value: false" in text(r)


async def test_bad_names_and_the_cap(mcp_config: Path) -> None:
    """Catalogue C603 (and C602's name rule)."""
    async with session(mcp_config, CODERUN_MAX_SESSIONS="1") as s:
        r = await s.call_tool("run_python", {"session": "no spaces", "program": "return 1"})
        assert r.is_error and "session must be 1 to 64 characters" in text(r)
        r = await s.call_tool("run_python", {"session": "first", "program": "return 1"})
        assert not r.is_error, text(r)
        r = await s.call_tool("run_python", {"session": "second", "program": "return 1"})
        assert r.is_error and 'cannot open session "second": session cap reached (CODERUN_MAX_SESSIONS=1)' in text(r)
        r = await s.call_tool("close_python_session", {"session": "first"})
        assert not r.is_error, text(r)
        r = await s.call_tool("run_python", {"session": "second", "program": "return 2"})
        assert not r.is_error and "value: 2" in text(r)


async def test_a_killed_session_is_reported_lost_then_reopens(mcp_config: Path) -> None:
    """Catalogue C604."""
    async with session(mcp_config, **PROCESS_TIER) as s:
        r = await s.call_tool("run_python", {"session": "k", "program": "import os\nx = 1\nreturn os.getpid()"})
        pid = r.structured_content["value"]
        os.kill(pid, signal.SIGKILL)
        assert gone(pid)
        time.sleep(0.2)  # the daemon notices the death between runs
        r = await s.call_tool("run_python", {"session": "k", "program": "return x"})
        assert r.is_error, text(r)
        assert 'session "k" was lost' in text(r) and 'the next run_python call with session "k" starts a fresh session' in text(r)
        r = await s.call_tool("run_python", {"session": "k", "program": "return 'x' in globals()"})
        assert not r.is_error and 'opened session "k"' in text(r) and "value: false" in text(r)


async def test_disconnect_closes_every_session(mcp_config: Path) -> None:
    """Catalogue C605."""
    pids = []
    async with session(mcp_config, **PROCESS_TIER) as s:
        for name in ("a", "b"):
            r = await s.call_tool("run_python", {"session": name, "program": "import os\nreturn os.getpid()"})
            pids.append(r.structured_content["value"])
    assert all(gone(pid) for pid in pids), pids
