"""One name and one version everywhere: go.mod, the npm manifests, pyproject.toml, and the
platform tables the two clients and the packaging script each keep."""

from __future__ import annotations

import json
import re
import sys
import tomllib

from packaging_support import dist

REPO = dist.REPO
MODULE = "github.com/coderun-rpc/coderun-rpc"


def test_module_path_and_package_names() -> None:
    assert re.search(r"^module (\S+)$", (REPO / "go.mod").read_text(), re.MULTILINE).group(1) == MODULE  # type: ignore[union-attr]
    assert dist.BUILDINFO == f"{MODULE}/internal/buildinfo" and (REPO / "internal" / "buildinfo").is_dir()
    assert json.loads((dist.TS / "package.json").read_text())["name"] == "@coderun/client"
    project = tomllib.loads((dist.PY / "pyproject.toml").read_text())["project"]
    assert project["name"] == "coderun"
    assert project["scripts"] == {"coderun-rpc": "coderun._cli:main"}


def test_every_manifest_has_the_same_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", dist.version())


def test_platform_packages_match_the_table() -> None:
    folders = sorted(p.name for p in (dist.TS / "platforms").iterdir() if p.is_dir())
    assert folders == sorted(f"linux-{a.npm}" for a in dist.ARCHES.values())
    for a in dist.ARCHES.values():
        m = json.loads((dist.TS / "platforms" / f"linux-{a.npm}" / "package.json").read_text())
        assert (m["name"], m["os"], m["cpu"]) == (a.npm_package, ["linux"], [a.npm])
        assert m["bin"] == {"coderun-rpc": "bin/coderun-rpc"} and "bin/coderun-rpc" in m["files"]


def test_the_ts_client_looks_for_the_published_packages() -> None:
    source = (dist.TS / "src" / "locate.ts").read_text()
    rows = re.findall(r"'(linux-\w+)': \{ name: '([^']+)', elfMachine: (\d+) \}", source)
    table = {key: (name, int(machine)) for key, name, machine in rows}
    assert table == {f"linux-{a.npm}": (a.npm_package, a.elf_machine) for a in dist.ARCHES.values()}


def test_the_python_client_looks_for_the_published_wheels() -> None:
    sys.path.insert(0, str(dist.PY / "src"))
    try:
        from coderun._locate import PLATFORMS
    finally:
        sys.path.remove(str(dist.PY / "src"))
    assert PLATFORMS == {f"linux-{a.wheel}": a.elf_machine for a in dist.ARCHES.values()}
