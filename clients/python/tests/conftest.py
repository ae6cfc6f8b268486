"""Test set-up: import the package from the source tree; locate the built daemon."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
REPO = HERE.parent.parent.parent

if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))
sys.path.append(str(REPO / "py" / "tests"))
from tmphygiene import nothing_left_in_tmp, own_tmpdir  # noqa: E402,F401 (fixtures)


def daemon_binary() -> str | None:
    """The daemon to test against: CODERUN_RPC_BIN (the Makefile exports it) or bin/coderun-rpc."""
    for candidate in (os.environ.get("CODERUN_RPC_BIN"), str(REPO / "bin" / "coderun-rpc")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


# async tests without a plugin: run every coroutine test function in a fresh event loop.
import asyncio  # noqa: E402
import inspect  # noqa: E402

import pytest  # noqa: E402


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**args), 60))
    return True
