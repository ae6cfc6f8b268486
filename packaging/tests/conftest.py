"""The packaging tests' fixture: one host-only build per session."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from packaging_support import dist

sys.path.append(str(Path(__file__).resolve().parents[2] / "py" / "tests"))
from tmphygiene import nothing_left_in_tmp, own_tmpdir  # noqa: E402,F401 (fixtures)


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
