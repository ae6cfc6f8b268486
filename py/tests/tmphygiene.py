"""Test hygiene shared by the pytest suites (py/tests, clients/python/tests, packaging/tests).

No test writes outside its own temporary directory: `own_tmpdir` points TMPDIR (and Python's
tempfile) at the test's tmp_path, so every daemon, fork server and child a test starts stages its
directories there. `nothing_left_in_tmp` fails the suite when anything named coderun-* appeared in
the machine's temporary directory while it ran (leakcheck.Suite is the Go suites' counterpart).
A conftest imports both fixtures.
"""

from __future__ import annotations

import glob
import os
import tempfile
import time
from pathlib import Path

import pytest

PATTERN = "coderun-*"


def _entries(tmp: str) -> set[str]:
    return set(glob.glob(os.path.join(glob.escape(tmp), PATTERN)))


@pytest.fixture(scope="session", autouse=True)
def nothing_left_in_tmp():
    """Fails the suite (an error at the last teardown) when it left an entry named coderun-* in
    the machine's temporary directory; a daemon's watchdog gets a few seconds to remove its own."""
    tmp = tempfile.gettempdir()  # the machine's: no test has redirected it yet
    before = _entries(tmp)
    yield
    deadline = time.monotonic() + 5
    while (left := _entries(tmp) - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    if left:
        pytest.fail(f"the suite left {len(left)} entries named {PATTERN} in {tmp}: {sorted(left)}", pytrace=False)


@pytest.fixture(autouse=True)
def own_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR, and tempfile's directory, are the test's own tmp_path."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path
