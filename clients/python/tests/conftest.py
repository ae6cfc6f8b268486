"""Test set-up: import the package from the source tree; locate the built daemon."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

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


# ------------------------------------------------------------------ the framework adapters' tests

CHART_PROGRAM = """
import matplotlib.pyplot as plt
paris = await tools.get_temperature(city="Paris")
oslo = await tools["get-humidity"](city="Oslo")
plt.bar(["Paris", "Oslo"], [paris, oslo])
plt.show()
seen = globals().get("seen", 0) + 1
return {"paris": paris, "oslo": oslo, "seen": seen}
"""
"""What a model writes in the adapters' end-to-end tests: two host tools (one whose name is not
an identifier), a chart, and a counter that only grows when runs share a session."""


def code_daemon() -> "Any":
    """A daemon factory for ``CodeMode``: the built binary, its children on this interpreter
    (it has matplotlib), with the address space matplotlib needs."""
    from coderun import Client

    bin_ = daemon_binary()
    assert bin_ is not None, "daemon not built (make build)"
    return lambda: Client.start(bin_, env={"CODERUN_PYTHON_BIN": sys.executable, "CODERUN_ADDRESS_SPACE_MB": "2048"})


def assert_chart_text(text: str, seen: int) -> None:
    """The model's text for CHART_PROGRAM: both tools' values and the session counter, after
    what the run logged (matplotlib may warn about its cache directory)."""
    assert text.splitlines()[-1] == f'value: {{"paris":21,"oslo":80,"seen":{seen}}}', text


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
