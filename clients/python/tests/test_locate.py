"""Finding the daemon: the order, the platform checks and the errors, on files made here.

The host platform is passed in (``Host``), never patched, so each case asks as that host would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
from conftest import SRC, daemon_binary

from coderun import Client, DaemonNotFound, Host, find_daemon

X64 = Host("Linux", "x86_64")
ARM = Host("Linux", "aarch64")


def elf(path: Path, machine: int = 62, mode: int = 0o755, section_table_end: int = 64) -> Path:
    """A file with a 64-bit little-endian ELF header for ``machine`` (enough for the checks),
    whose section header table (one 64-byte entry) ends at ``section_table_end``."""
    header = bytearray(64)
    header[:7] = b"\x7fELF\x02\x01\x01"
    header[16:18] = (2).to_bytes(2, "little")
    header[18:20] = machine.to_bytes(2, "little")
    header[40:48] = (section_table_end - 64).to_bytes(8, "little")
    header[58:62] = (64).to_bytes(2, "little") + (1).to_bytes(2, "little")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(header))
    path.chmod(mode)
    return path


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def clean(**extra: str | None) -> dict[str, str | None]:
    return {"CODERUN_RPC_BIN": None, "PATH": "/nonexistent", **extra}


def test_order_command_env_packaged_path(tmp_path: Path) -> None:
    cmd, env_bin, packaged, on_path = (elf(tmp_path / d / "coderun-rpc") for d in ("cmd", "env", "pkg", "path"))
    path_dir = str(on_path.parent)
    assert find_daemon(str(cmd), clean(CODERUN_RPC_BIN=str(env_bin)), host=X64, packaged=packaged) == str(cmd)
    assert find_daemon(None, clean(CODERUN_RPC_BIN=str(env_bin)), host=X64, packaged=packaged) == str(env_bin)
    assert find_daemon(None, clean(PATH=path_dir), host=X64, packaged=packaged) == str(packaged)
    assert find_daemon(None, clean(PATH=path_dir), host=X64, packaged=tmp_path / "none") == str(on_path)


def test_arm64_host_takes_an_aarch64_binary(tmp_path: Path) -> None:
    packaged = elf(tmp_path / "coderun-rpc", machine=183)
    assert find_daemon(None, clean(), host=Host("Linux", "arm64"), packaged=packaged) == str(packaged)


@pytest.mark.parametrize("host", [Host("Darwin", "arm64"), Host("Linux", "i686"), Host("Windows", "AMD64")])
def test_platform_without_binary_names_platform_and_fallbacks(tmp_path: Path, host: Host) -> None:
    packaged = elf(tmp_path / "coderun-rpc")  # present, but nothing is published for this host
    with pytest.raises(DaemonNotFound) as e:
        find_daemon(None, clean(), host=host, packaged=packaged)
    msg = str(e.value)
    assert f"for {host.key}" in msg and "linux-x86_64, linux-aarch64" in msg, msg
    for fallback in ("command", "CODERUN_RPC_BIN", "PATH", "command="):
        assert fallback in msg, msg


def test_sdist_install_says_it_needs_the_binary_on_path(tmp_path: Path) -> None:
    with pytest.raises(DaemonNotFound, match=r"(?s)pure-Python sdist carries none.*PATH: no coderun-rpc on PATH"):
        find_daemon(None, clean(), host=X64, packaged=tmp_path / "absent")


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda p: elf(p, mode=0o644), "is not executable"),
        (lambda p: elf(p, machine=183), r"another architecture \(ELF machine 183, linux-x86_64 needs 62\)"),
        (lambda p: (p.write_bytes(b"\x7fEL"), p.chmod(0o755)), "not an ELF executable"),
        (lambda p: (p.write_bytes(b"\x7fELF\x02\x01"), p.chmod(0o755)), "truncated"),
        (lambda p: elf(p, section_table_end=4096), r"is truncated \(64 of at least 4096 bytes"),
        (lambda p: script(p, "exit 0"), "not an ELF executable"),
    ],
)
def test_broken_packaged_binary_is_named_and_passed_over(
    tmp_path: Path, make: Callable[[Path], object], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    packaged = tmp_path / "pkg" / "coderun-rpc"
    packaged.parent.mkdir()
    make(packaged)
    with pytest.raises(DaemonNotFound, match=why):
        find_daemon(None, clean(), host=X64, packaged=packaged)
    good = elf(tmp_path / "path" / "coderun-rpc")
    caplog.clear()
    assert find_daemon(None, clean(PATH=str(good.parent)), host=X64, packaged=packaged) == str(good)
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert re.search(f"packaged daemon unusable .*{why}.*looking on PATH", caplog.text), caplog.text


def test_unusable_explicit_choice_is_an_error_at_once(tmp_path: Path) -> None:
    packaged = elf(tmp_path / "pkg" / "coderun-rpc")
    bad = elf(tmp_path / "bad", mode=0o600)
    with pytest.raises(DaemonNotFound, match=r"^CODERUN_RPC_BIN: .* is not executable"):
        find_daemon(None, clean(CODERUN_RPC_BIN=str(bad)), host=X64, packaged=packaged)
    with pytest.raises(DaemonNotFound, match=r"^command: .* another architecture"):
        find_daemon(str(elf(tmp_path / "arm", machine=183)), clean(), host=X64, packaged=packaged)
    with pytest.raises(DaemonNotFound, match=r"^command: 'no-such-coderun': no no-such-coderun on PATH \(/nonexistent\)"):
        find_daemon("no-such-coderun", clean(), host=X64, packaged=packaged)


def test_path_skips_unusable_entries_and_the_console_script(tmp_path: Path) -> None:
    own = script(tmp_path / "venv" / "coderun-rpc", "# from coderun._cli import main")
    wrong = elf(tmp_path / "arm" / "coderun-rpc", machine=183)
    good = elf(tmp_path / "good" / "coderun-rpc")
    search = os.pathsep.join(str(p.parent) for p in (own, wrong, good))
    assert find_daemon(None, clean(PATH=search), host=X64, packaged=tmp_path / "none") == str(good)
    with pytest.raises(DaemonNotFound) as e:
        find_daemon(None, clean(PATH=os.pathsep.join(search.split(os.pathsep)[:2])), host=X64, packaged=tmp_path / "x")
    assert "console script" in str(e.value) and "another architecture" in str(e.value)


def test_user_scripts_run_when_chosen(tmp_path: Path) -> None:
    wrapper = script(tmp_path / "wrapper", "exec coderun-rpc")
    assert find_daemon(str(wrapper), clean(), host=X64) == str(wrapper)


def test_real_binary_as_the_packaged_one() -> None:
    bin_ = daemon_binary()
    if bin_ is None:
        pytest.skip("no built daemon")
    assert find_daemon(None, clean(), packaged=Path(bin_)) == bin_


async def test_start_with_a_corrupted_binary_fails_fast(tmp_path: Path) -> None:
    corrupt = tmp_path / "coderun-rpc"
    corrupt.write_bytes(b"\x00" * 100)
    corrupt.chmod(0o755)
    t0 = time.monotonic()
    with pytest.raises(DaemonNotFound, match="not an ELF executable"):
        await Client.start(str(corrupt))
    assert time.monotonic() - t0 < 1


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The console script's entry point, run as pip's wrapper runs it."""
    code = "import sys; from coderun._cli import main; main()"
    full = {**os.environ, "PYTHONPATH": str(SRC), **env}
    return subprocess.run([sys.executable, "-c", code, *args], env=full, capture_output=True, text=True, timeout=30)


def test_console_script_execs_the_daemon_with_args_and_exit_code(tmp_path: Path) -> None:
    fake = script(tmp_path / "fake", 'echo "args:$*"; exit 7')
    r = cli("--check", "two words", env={"CODERUN_RPC_BIN": str(fake)})
    assert (r.returncode, r.stdout) == (7, "args:--check two words\n")
    bin_ = daemon_binary()
    if bin_ is not None:
        r = cli("--version", env={"CODERUN_RPC_BIN": bin_})
        assert r.returncode == 0 and r.stdout.startswith("coderun-rpc "), r


def test_console_script_without_a_daemon(tmp_path: Path) -> None:
    r = cli("--version", env={"CODERUN_RPC_BIN": "", "PATH": str(tmp_path)})
    assert r.returncode == 127 and "cannot find the coderun-rpc daemon" in r.stderr, r
