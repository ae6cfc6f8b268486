"""Finding the coderun-rpc daemon binary.

The order is the one both clients follow: the ``command`` the caller passed, then
``CODERUN_RPC_BIN``, then the binary a platform wheel carries (``coderun/bin/coderun-rpc``),
then ``coderun-rpc`` on PATH. An explicit choice (the first two) that is unusable is an error at
once; a broken packaged binary is reported and passed over for PATH. When nothing works the error
names every place tried and why each failed, so a user on a platform without a published binary
(or with the pure-Python sdist installed) learns what to do instead.

The host is a parameter (``system``, ``machine``) so tests can ask as another platform would.
"""

from __future__ import annotations

import logging
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Mapping, Optional

from .errors import DaemonNotFound

__all__ = ["Host", "find_daemon", "PLATFORMS", "PACKAGED_BINARY"]

log = logging.getLogger("coderun")

NAME = "coderun-rpc"

PACKAGED_BINARY = Path(__file__).resolve().parent / "bin" / NAME
"""Where a platform wheel puts the daemon; absent in the pure-Python sdist."""

# ELF e_machine of each platform a wheel is published for.
PLATFORMS = {"linux-x86_64": 62, "linux-aarch64": 183}

# platform.machine() spellings of the same architectures.
_MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}

_SHT_NOBITS = 8
_NOT_ELF = "is not an ELF executable (corrupted or incomplete install?)"

# pip's console script for this package runs the same search; finding it on PATH would loop.
_OWN_SCRIPT_MARK = b"coderun._cli"


@dataclass(frozen=True)
class Host:
    """The platform asking: ``system`` as ``platform.system()``, ``machine`` as ``platform.machine()``."""

    system: str
    machine: str

    @classmethod
    def current(cls) -> "Host":
        return cls(platform.system(), platform.machine())

    @property
    def key(self) -> str:
        machine = self.machine.lower()
        return f"{self.system.lower()}-{_MACHINE_ALIASES.get(machine, machine)}"


def find_daemon(
    command: Optional[str] = None,
    env: Optional[Mapping[str, Optional[str]]] = None,
    *,
    host: Optional[Host] = None,
    packaged: Path = PACKAGED_BINARY,
) -> str:
    """The daemon binary: ``command``, else ``CODERUN_RPC_BIN``, else the packaged binary, else PATH.

    ``env`` is layered over ``os.environ`` for ``CODERUN_RPC_BIN`` and ``PATH`` (a ``None`` value
    unsets). Raises :class:`DaemonNotFound` naming each place tried.
    """
    host = host or Host.current()
    merged = merged_env(env)
    if command:
        return _explicit(command, "command", merged.get("PATH"), host)
    from_env = merged.get("CODERUN_RPC_BIN")
    if from_env:
        return _explicit(from_env, "CODERUN_RPC_BIN", merged.get("PATH"), host)
    tried = ["command: not given", "CODERUN_RPC_BIN: not set"]
    problem = _packaged_problem(packaged, host)
    if problem is None:
        return str(packaged)
    tried.append(f"packaged binary: {problem}")
    if packaged.exists():
        log.warning("coderun: packaged daemon unusable (%s); looking on PATH", problem)
    found, why = _on_path(merged.get("PATH"), host)
    if found is not None:
        return found
    tried.append(f"PATH: {why}")
    raise DaemonNotFound(
        f"cannot find the {NAME} daemon for {host.key}; tried, in order:\n  - "
        + "\n  - ".join(tried)
        + f"\nInstall a platform wheel (published for {', '.join(PLATFORMS)}), set CODERUN_RPC_BIN, "
        f"pass command=, or put {NAME} on PATH."
    )


def merged_env(env: Optional[Mapping[str, Optional[str]]]) -> dict[str, str]:
    """``os.environ`` with ``env`` layered over it; a ``None`` value removes the variable."""
    merged = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = v
    return merged


def _explicit(path: str, source: str, search_path: Optional[str], host: Host) -> str:
    """A binary the caller chose: a path, or a bare name looked up on PATH; unusable is an error."""
    if os.sep not in path:
        found, why = _on_path(search_path, host, name=path)
        if found is None:
            raise DaemonNotFound(f"{source}: {path!r}: {why}")
        return found
    problem = executable_problem(Path(path), host)
    if problem is not None:
        raise DaemonNotFound(f"{source}: {path!r} {problem}")
    return path


def _packaged_problem(packaged: Path, host: Host) -> Optional[str]:
    """Why the packaged binary cannot run here, or None when it can."""
    if host.key not in PLATFORMS:
        return f"none is published for {host.key} (only for {', '.join(PLATFORMS)})"
    if not packaged.exists():
        return "not installed (the pure-Python sdist carries none; platform wheels do)"
    problem = executable_problem(packaged, host, require_elf=True)
    return None if problem is None else f"{str(packaged)!r} {problem}"


def _on_path(search_path: Optional[str], host: Host, name: str = NAME) -> tuple[Optional[str], str]:
    """The first usable ``name`` on PATH, or None and why none was."""
    seen: list[str] = []
    for d in (search_path or "").split(os.pathsep):
        candidate = Path(d or ".") / name
        if not candidate.is_file():
            continue
        problem = executable_problem(candidate, host)
        if problem is None and _is_own_script(candidate):
            problem = "is the coderun Python package's console script, not the daemon"
        if problem is None:
            return str(candidate), ""
        seen.append(f"{str(candidate)!r} {problem}")
    return None, "; ".join(seen) if seen else f"no {name} on PATH ({search_path or 'unset'})"


def executable_problem(path: Path, host: Host, *, require_elf: bool = False) -> Optional[str]:
    """Why ``path`` cannot be executed on ``host``, or None.

    On Linux an ELF file must be 64-bit little-endian for the host's machine and as long as its
    header says (the header is read, so a foreign or truncated binary is named before it is run);
    a ``#!`` script passes unless ``require_elf``.
    """
    if not path.is_file():
        return "does not exist" if not path.exists() else "is not a file"
    if not os.access(path, os.X_OK):
        return "is not executable (chmod +x, or reinstall)"
    if host.system.lower() != "linux":
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF":
                return None if head[:2] == b"#!" and not require_elf else _NOT_ELF
            if len(head) < 64 or head[4] != 2 or head[5] != 1:
                return "has a truncated or non-64-bit-little-endian ELF header (corrupted install?)"
            machine = _u(head, 18, 2)
            want = PLATFORMS.get(host.key)
            if want is not None and machine != want:
                return f"is built for another architecture (ELF machine {machine}, {host.key} needs {want})"
            size = os.fstat(f.fileno()).st_size
            end = _elf_extent(f, head, size)
    except OSError as e:
        return f"cannot be read: {e.strerror}"
    if size < end:
        return f"is truncated ({size} of at least {end} bytes; corrupted or incomplete install?)"
    return None


def _u(data: bytes, offset: int, n: int) -> int:
    return int.from_bytes(data[offset : offset + n], "little")


def _elf_extent(f: BinaryIO, head: bytes, size: int) -> int:
    """The least size a 64-bit ELF file must have: the ends of its header tables, of every segment
    and of every section that occupies the file."""
    ph_off, ph_size, ph_num = _u(head, 32, 8), _u(head, 54, 2), _u(head, 56, 2)
    sh_off, sh_size, sh_num = _u(head, 40, 8), _u(head, 58, 2), _u(head, 60, 2)
    end = max(ph_off + ph_size * ph_num, sh_off + sh_size * sh_num)
    if size < end:
        return end  # the tables themselves are cut: no need to read them
    for ph in _entries(f, ph_off, ph_size, ph_num):
        end = max(end, _u(ph, 8, 8) + _u(ph, 32, 8))  # p_offset + p_filesz
    for sh in _entries(f, sh_off, sh_size, sh_num):
        if _u(sh, 4, 4) != _SHT_NOBITS:  # .bss and the like take no room in the file
            end = max(end, _u(sh, 24, 8) + _u(sh, 32, 8))  # sh_offset + sh_size
    return end


def _entries(f: BinaryIO, offset: int, size: int, count: int) -> list[bytes]:
    """The entries of a header table that are in the file."""
    if size < 40:
        return []  # not a 64-bit entry: nothing to read from it
    f.seek(offset)
    table = f.read(size * count)
    return [table[i : i + size] for i in range(0, len(table) - size + 1, size)]


def _is_own_script(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except OSError:
        return False
    return head[:2] == b"#!" and _OWN_SCRIPT_MARK in head
