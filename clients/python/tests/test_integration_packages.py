"""Packages on demand (docs/packages.md) through the client, against the real built daemon: a
find-links directory of tiny wheels this test writes, no index, no network."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from coderun import Client, InvalidParams

from conftest import REPO, daemon_binary

BIN = daemon_binary()
pytestmark = pytest.mark.skipif(BIN is None, reason="daemon not built (make build)")


def uv_binary() -> str:
    """uv as requirements-test.txt installs it beside this interpreter, else on PATH."""
    for candidate in (Path(sys.executable).parent / "uv", REPO / ".venv" / "bin" / "uv"):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("uv")
    if found is None:
        pytest.fail("no uv: requirements-test.txt installs it (make deps)")
    return found


def write_wheel(directory: Path, name: str, version: str, files: dict[str, str]) -> None:
    """A pure-Python wheel: the files, METADATA, WHEEL and their RECORD."""
    dist = f"{name}-{version}.dist-info"
    files = {
        **files,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join(record + [f"{dist}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as z:
        for path, text in files.items():
            z.writestr(path, text)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    links = tmp_path / "links"
    links.mkdir()
    write_wheel(links, "tinyc", "1.0", {"tinyc/__init__.py": "C = 'c1'\n"})
    return {
        "CODERUN_LOG_LEVEL": "warn",
        "CODERUN_PACKAGES": "tinyc",
        "CODERUN_PACKAGE_INDEX": "none",
        "CODERUN_PACKAGE_FIND_LINKS": str(links),
        "CODERUN_PACKAGE_CACHE_DIR": str(tmp_path / "cache"),
        "CODERUN_UV_BIN": uv_binary(),
    }


async def test_run_and_session_packages_c844(env: dict[str, str]) -> None:
    """C844: ``packages`` on run, describe and session; stats.install_ms; refusals raise."""
    c = await Client.start(BIN, env=env)
    try:
        r = await c.run("import tinyc\nreturn tinyc.C", packages=["tinyc"])
        assert r.error is None and r.value == "c1", (r.error, r.logs)
        assert r.stats.install_ms is not None
        plain = await c.run("return 1")
        assert plain.stats.install_ms is None
        failed = await c.run("return 1", packages=["tinyc>=2"])
        assert failed.error is not None and failed.error.kind == "exception"
        assert failed.error.message.startswith("packages tinyc>=2: ")
        with pytest.raises(InvalidParams, match=r"packages\[0\] names numpy, which CODERUN_PACKAGES does not allow"):
            await c.run("return 1", packages=["numpy"])
        with pytest.raises(TypeError):
            await c.run("return 1", packages="tinyc")  # type: ignore[arg-type]
        stubs = await c.describe(packages=["tinyc"])
        assert "# Packages installed for this run: tinyc.\n" in stubs
        async with c.session(packages=["tinyc"]) as s:
            r = await s.run("import tinyc\nreturn tinyc.C")
            assert r.value == "c1", (r.error, r.logs)
    finally:
        await c.close()
