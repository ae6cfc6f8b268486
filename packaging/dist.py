#!/usr/bin/env python3
"""Build the release artefacts into one folder (``make dist``).

For each requested Linux architecture: a static ``coderun-rpc`` (CGO off, -trimpath, stripped,
version and commit stamped into internal/buildinfo, the sandbox's lean init embedded), its npm platform package
``@coderun/cli-linux-<arch>`` and its platform wheel of ``coderun``; once: the npm client
``@coderun/client`` (with the platform packages as optional dependencies), the pure-Python sdist,
and ``SHA256SUMS`` over everything.

The version comes from clients/ts/package.json and must be the same in every manifest; a
mismatch stops the build. Standard library only (``tomllib``: Python 3.11+); needs go, git and
npm, and clients/ts/node_modules for the TypeScript build.

    python3 packaging/dist.py [--out dist] [--arch amd64] [--arch arm64]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ImportError:  # pragma: no cover - the build machine's Python is 3.11+
    sys.exit("packaging/dist.py needs Python 3.11 or newer (tomllib)")

REPO = Path(__file__).resolve().parent.parent
TS = REPO / "clients" / "ts"
PY = REPO / "clients" / "python"
BUILDINFO = "github.com/coderun-rpc/coderun-rpc/internal/buildinfo"
LEANINIT = REPO / "child/sandbox/leaninit/coderun-sandbox-init"  # where the daemon's build embeds it from


@dataclass(frozen=True)
class Arch:
    """One published platform, in each ecosystem's spelling."""

    go: str  # GOARCH
    npm: str  # process.arch
    wheel: str  # the manylinux tag's machine, as platform.machine()
    elf_machine: int  # e_machine in the binary's ELF header, which the clients check

    @property
    def npm_package(self) -> str:
        return f"@coderun/cli-linux-{self.npm}"

    @property
    def wheel_tags(self) -> list[str]:
        # The binary is static, so the oldest manylinux tag pip still offers covers it.
        return [f"py3-none-manylinux_2_17_{self.wheel}", f"py3-none-manylinux2014_{self.wheel}"]


ARCHES = {a.go: a for a in (Arch("amd64", "x64", "x86_64", 62), Arch("arm64", "arm64", "aarch64", 183))}

# A fixed timestamp for archive members, so the same inputs give the same bytes.
EPOCH = (1980, 1, 1, 0, 0, 0)


def host_arch() -> str:
    """The GOARCH of this machine."""
    machine = os.uname().machine
    for a in ARCHES.values():
        if machine in (a.go, a.wheel):
            return a.go
    sys.exit(f"no published platform for this machine ({machine})")


def version() -> str:
    """The one version of every package; exits naming the manifests that disagree."""
    found = {
        "clients/ts/package.json": json.loads((TS / "package.json").read_text())["version"],
        "clients/python/pyproject.toml": tomllib.loads((PY / "pyproject.toml").read_text())["project"]["version"],
        "clients/python/src/coderun/__init__.py": _grep(PY / "src/coderun/__init__.py", r'__version__ = "([^"]+)"'),
        "clients/ts/src/client.ts": _grep(TS / "src/client.ts", r"CLIENT_VERSION = '([^']+)'"),
    }
    for a in ARCHES.values():
        manifest = TS / "platforms" / f"linux-{a.npm}" / "package.json"
        found[str(manifest.relative_to(REPO))] = json.loads(manifest.read_text())["version"]
    if len(set(found.values())) != 1:
        sys.exit("versions disagree: " + ", ".join(f"{k}={v}" for k, v in found.items()))
    return next(iter(found.values()))


def _grep(path: Path, pattern: str) -> str:
    m = re.search(pattern, path.read_text())
    if m is None:
        sys.exit(f"{path}: no match for {pattern}")
    return m.group(1)


def commit() -> str:
    """HEAD, marked -dirty when the tree has uncommitted changes; "unknown" outside git."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def build_binary(arch: Arch, ver: str, rev: str, out: Path) -> Path:
    """A static, stripped linux/<arch> daemon stamped with ``ver`` and ``rev``, carrying the sandbox's
    lean init (built first for the same architecture, embedded by the build tag ``sandboxinit``)."""
    target = out / f"coderun-rpc-linux-{arch.go}"
    ldflags = f"-s -w -X {BUILDINFO}.version={ver} -X {BUILDINFO}.commit={rev}"
    env = {**os.environ, "CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": arch.go}
    go = os.environ.get("GO", "go")
    lean = [go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(LEANINIT), "./cmd/coderun-sandbox-init"]
    subprocess.run(lean, cwd=REPO, env=env, check=True)
    cmd = [go, "build", "-trimpath", "-tags", "sandboxinit", "-ldflags", ldflags, "-o", str(target), "./cmd/coderun-rpc"]
    subprocess.run(cmd, cwd=REPO, env=env, check=True)
    return target


def npm_pack(folder: Path, out: Path) -> Path:
    """``npm pack`` of a staged folder (no scripts run); the tarball's path."""
    res = subprocess.run(
        ["npm", "pack", "--json", "--ignore-scripts", "--pack-destination", str(out.resolve())],
        cwd=folder, capture_output=True, text=True, check=True,
    )
    return out / json.loads(res.stdout)[0]["filename"]


def npm_platform_package(arch: Arch, binary: Path, out: Path, stage: Path) -> Path:
    """The platform package: its manifest and README from clients/ts/platforms, and the binary."""
    folder = stage / f"cli-linux-{arch.npm}"
    shutil.copytree(TS / "platforms" / f"linux-{arch.npm}", folder)
    (folder / "bin").mkdir()
    shutil.copy(binary, folder / "bin" / "coderun-rpc")
    (folder / "bin" / "coderun-rpc").chmod(0o755)
    return npm_pack(folder, out)


def npm_client_package(ver: str, out: Path, stage: Path) -> Path:
    """@coderun/client, built from clients/ts, with every platform package as an optional dependency.

    The optional dependencies are added here, not in clients/ts/package.json: the platform
    packages are published together with the client, and a development ``npm ci`` would otherwise
    look them up in the registry.
    """
    subprocess.run(["npm", "run", "build"], cwd=TS, check=True, stdout=subprocess.DEVNULL)
    folder = stage / "client"
    manifest = json.loads((TS / "package.json").read_text())
    manifest["optionalDependencies"] = {a.npm_package: ver for a in ARCHES.values()}
    folder.mkdir()
    for entry in manifest["files"]:
        src = TS / entry
        (shutil.copytree if src.is_dir() else shutil.copy)(src, folder / entry)
    (folder / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return npm_pack(folder, out)


def _project() -> dict:
    return tomllib.loads((PY / "pyproject.toml").read_text())["project"]


def core_metadata() -> str:
    """PKG-INFO / METADATA (core metadata 2.1) from pyproject.toml's [project] table."""
    p = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p['description']}",
        f"License: {p['license']['text']}",
        f"Requires-Python: {p['requires-python']}",
        *(f"Classifier: {c}" for c in p.get("classifiers", [])),
        *(f"Requires-Dist: {d}" for d in p.get("dependencies", [])),
    ]
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + (PY / p["readme"]).read_text()


def package_sources() -> list[Path]:
    """The files of the ``coderun`` package, relative to clients/python/src."""
    src = PY / "src"
    files = [f for f in sorted((src / "coderun").rglob("*")) if f.is_file() and "__pycache__" not in f.parts]
    return [f.relative_to(src) for f in files if f.suffix in (".py", ".typed")]


def build_wheel(arch: Arch, binary: Path, out: Path) -> Path:
    """A platform wheel of ``coderun`` carrying the daemon as ``coderun/bin/coderun-rpc``."""
    p = _project()
    name, ver = p["name"], p["version"]
    info = f"{name}-{ver}.dist-info"
    members: list[tuple[str, bytes, int]] = [
        (str(f), (PY / "src" / f).read_bytes(), 0o644) for f in package_sources()
    ]
    members.append(("coderun/bin/coderun-rpc", binary.read_bytes(), 0o755))
    members.append((f"{info}/METADATA", core_metadata().encode(), 0o644))
    wheel = ["Wheel-Version: 1.0", "Generator: coderun packaging/dist.py", "Root-Is-Purelib: false"]
    members.append((f"{info}/WHEEL", ("\n".join(wheel + [f"Tag: {t}" for t in arch.wheel_tags]) + "\n").encode(), 0o644))
    scripts = "".join(f"{k} = {v}\n" for k, v in p.get("scripts", {}).items())
    members.append((f"{info}/entry_points.txt", f"[console_scripts]\n{scripts}".encode(), 0o644))
    record = "".join(f"{path},sha256={_b64sha256(data)},{len(data)}\n" for path, data, _ in members)
    members.append((f"{info}/RECORD", (record + f"{info}/RECORD,,\n").encode(), 0o644))
    platform_tag = ".".join(t.split("-")[2] for t in arch.wheel_tags)
    target = out / f"{name}-{ver}-py3-none-{platform_tag}.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data, mode in members:
            zi = zipfile.ZipInfo(path, EPOCH)
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return target


def _b64sha256(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_sdist(out: Path) -> Path:
    """The pure-Python sdist (no binary): installs anywhere, then needs coderun-rpc on PATH."""
    p = _project()
    base = f"{p['name']}-{p['version']}"
    files = [Path("pyproject.toml"), Path(p["readme"])] + [Path("src") / f for f in package_sources()]
    target = out / f"{base}.tar.gz"
    with tarfile.open(target, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel, data in [(f, (PY / f).read_bytes()) for f in files] + [(Path("PKG-INFO"), core_metadata().encode())]:
            ti = tarfile.TarInfo(f"{base}/{rel}")
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 315532800
            tar.addfile(ti, io.BytesIO(data))
    return target


def write_checksums(out: Path, artefacts: list[Path]) -> Path:
    """SHA256SUMS in ``sha256sum -c`` format."""
    sums = out / "SHA256SUMS"
    lines = [f"{hashlib.sha256(a.read_bytes()).hexdigest()}  {a.name}\n" for a in sorted(artefacts)]
    sums.write_text("".join(lines))
    return sums


def build(out: Path, arches: list[Arch]) -> list[Path]:
    """Every artefact for ``arches`` into ``out``; returns them (SHA256SUMS last)."""
    ver, rev = version(), commit()
    out.mkdir(parents=True, exist_ok=True)
    artefacts: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="coderun-dist-") as tmp:
        stage = Path(tmp)
        for arch in arches:
            binary = build_binary(arch, ver, rev, out)
            artefacts += [binary, npm_platform_package(arch, binary, out, stage), build_wheel(arch, binary, out)]
        artefacts += [npm_client_package(ver, out, stage), build_sdist(out)]
    return artefacts + [write_checksums(out, artefacts)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "dist")
    ap.add_argument("--arch", action="append", choices=sorted(ARCHES), help="GOARCH; repeat; default: all")
    ap.add_argument("--host", action="store_true", help="only this machine's architecture")
    args = ap.parse_args()
    names = [host_arch()] if args.host else (args.arch or sorted(ARCHES))
    for path in build(args.out, [ARCHES[n] for n in names]):
        print(f"{path.stat().st_size:>10}  {path}")


if __name__ == "__main__":
    main()
