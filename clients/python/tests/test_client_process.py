"""Transport tests with a real child process and real pipes (a stand-in daemon script)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from coderun import Client, ConnectionLost, DaemonNotFound

FAKE = str(Path(__file__).resolve().parent / "fake_daemon_proc.py")


async def start(mode: str = "serve") -> Client:
    return await Client.start([sys.executable, FAKE, mode])


async def test_start_run_close() -> None:
    async with await start() as c:
        assert c.server_info == {"name": "fake"}
        r = await c.run("hello")
        assert r.value == "hello"
        proc = c.process
    assert proc is not None and proc.returncode == 0


async def test_close_answers_live_runs_with_abort() -> None:
    c = await start()
    task = asyncio.ensure_future(c.run("sleep"))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(c.close(), 10)
    r = await task
    assert r.error is not None and r.error.message == "server is shutting down"


async def test_killed_daemon_fails_pending_runs_promptly() -> None:
    c = await start()
    tasks = [asyncio.ensure_future(c.run("sleep")) for _ in range(3)]
    await asyncio.sleep(0.1)
    assert c.process is not None
    t0 = time.monotonic()
    c.process.kill()
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
    assert time.monotonic() - t0 < 2
    assert all(isinstance(r, ConnectionLost) for r in results), results
    assert "killed by signal 9" in str(results[0])
    t1 = time.monotonic()
    await c.close()
    assert time.monotonic() - t1 < 2


async def test_task_cancellation_over_real_pipes() -> None:
    async with await start() as c:
        task = asyncio.ensure_future(c.run("sleep"))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await c.run("after")).value == "after"


async def test_daemon_that_exits_at_start(capfd: pytest.CaptureFixture[str]) -> None:
    # By default the daemon's stderr is kept, not shown: its last words join the error.
    with pytest.raises(ConnectionLost, match=r"exited with code 2 \(stderr: CODERUN_X: invalid\)"):
        await Client.start([sys.executable, FAKE, "exit2"])
    assert "CODERUN_X" not in capfd.readouterr().err
    with pytest.raises(ConnectionLost, match="exited with code 2$"):
        await Client.start([sys.executable, FAKE, "exit2"], stderr="ignore")
    with pytest.raises(ConnectionLost, match="exited with code 2$"):
        await Client.start([sys.executable, FAKE, "exit2"], stderr="inherit")
    assert "CODERUN_X: invalid" in capfd.readouterr().err
    with pytest.raises(ValueError, match="stderr must be"):
        await Client.start([sys.executable, FAKE, "exit2"], stderr="devnull")


async def test_missing_binary() -> None:
    with pytest.raises(DaemonNotFound):
        await Client.start("/nonexistent/coderun-rpc")
    with pytest.raises(DaemonNotFound):
        await Client.start(["no-such-coderun-binary-xyz"])
