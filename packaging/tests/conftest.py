"""Shared set-up of the packaging tests: the dist module, and one host-only build per session."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

PACKAGING = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dist", PACKAGING / "dist.py")
assert _spec is not None and _spec.loader is not None
dist = importlib.util.module_from_spec(_spec)
sys.modules["dist"] = dist
_spec.loader.exec_module(dist)


@pytest.fixture(scope="session")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """This machine's artefacts, built as `make dist` builds them, by kind.

    The other platforms' npm packages are packed from their manifests alone (no binary): npm
    reads them, sees the wrong cpu and skips them, as it would skip the published ones.
    """
    out = tmp_path_factory.mktemp("dist")
    host = dist.ARCHES[dist.host_arch()]
    built = dist.build(out, [host])
    stage = tmp_path_factory.mktemp("stage")
    others = {}
    for arch in dist.ARCHES.values():
        if arch != host:
            folder = stage / arch.npm
            shutil.copytree(dist.TS / "platforms" / f"linux-{arch.npm}", folder)
            others[arch.npm_package] = dist.npm_pack(folder, out)
    by_kind = {
        "binary": next(p for p in built if p.name.startswith("coderun-rpc-linux-")),
        "npm_platform": next(p for p in built if p.name.startswith("coderun-cli-linux-")),
        "npm_client": next(p for p in built if p.name.startswith("coderun-client-")),
        "wheel": next(p for p in built if p.suffix == ".whl"),
        "sdist": next(p for p in built if p.name.endswith(".tar.gz")),
        "sums": built[-1],
    }
    by_kind.update({f"npm_other:{name}": path for name, path in others.items()})
    return by_kind


def user_path(*extra: str) -> str:
    """A PATH with node, npm and python3 but no Go and no coderun-rpc, as a user's might be."""
    dirs = [*extra]
    for tool in ("node", "npm", "python3"):
        found = shutil.which(tool)
        if found:
            dirs.append(os.path.dirname(os.path.realpath(found)))
    dirs += ["/usr/bin", "/bin"]
    path = os.pathsep.join(d for d in dict.fromkeys(dirs) if not os.path.exists(os.path.join(d, "go")))
    assert shutil.which("go", path=path) is None and shutil.which("coderun-rpc", path=path) is None, path
    return path


def user_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no CODERUN_* or Go variables, PATH from user_path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODERUN_", "GO", "npm_", "VIRTUAL_ENV"))}
    env["PATH"] = user_path()
    env.update(extra)
    return env
