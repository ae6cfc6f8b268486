"""The Dockerfile, checked without a container runtime: every stage and COPY refers to something
that exists, the final image is what the issue asks for, and its build matches `make dist`'s."""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging_support import dist

REPO = dist.REPO


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def parse(text: str) -> list[Stage]:
    """Stages of a Dockerfile: comments dropped, continuation lines joined."""
    joined = re.sub(r"\s*\\\n\s*", " ", "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#")))
    stages: list[Stage] = []
    for line in joined.splitlines():
        if not line.strip():
            continue
        keyword, _, args = line.strip().partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", args, re.IGNORECASE)
            assert m, f"FROM {args}"
            stages.append(Stage(m.group(1), m.group(2)))
        else:
            assert stages, f"{keyword} before FROM"
            stages[-1].instructions.append((keyword, args))
    return stages


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore excludes ``path`` (or a folder holding it); no `!` exceptions used."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(p, pat.removeprefix("**/")) for p in prefixes for pat in patterns)


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse((REPO / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [l.strip().rstrip("/") for l in lines if l.strip() and not l.startswith("#")]


def test_parse_sees_stages_and_continuations() -> None:
    s = parse("FROM a AS one\nRUN x \\\n  y\n# c\nFROM b\nCOPY --from=one /o /p\n")
    assert [(x.image, x.name) for x in s] == [("a", "one"), ("b", None)]
    assert s[0].all("RUN") == ["x y"] and s[1].all("COPY") == ["--from=one /o /p"]


def test_copies_refer_to_earlier_stages_and_existing_files(stages: list[Stage], dockerignore: list[str]) -> None:
    assert len(stages) >= 2, "multi-stage"
    for i, stage in enumerate(stages):
        for args in stage.all("COPY"):
            words = shlex.split(args)
            flags = dict(w[2:].split("=", 1) for w in words if w.startswith("--"))
            sources = [w for w in words if not w.startswith("--")][:-1]
            if "from" in flags:
                earlier = {s.name: s for s in stages[:i] if s.name}
                assert flags["from"] in earlier, f"COPY --from={flags['from']}: no earlier stage of that name"
                runs = " ".join(earlier[flags["from"]].all("RUN"))
                for src in sources:
                    assert f"-o {src}" in runs, f"stage {flags['from']} does not build {src}"
                continue
            for src in sources:
                if src == ".":
                    continue
                assert (REPO / src).exists(), f"COPY {src}: no such file"
                assert not ignored(src, dockerignore), f"COPY {src}: excluded by .dockerignore"


def test_the_build_context_keeps_the_go_sources(dockerignore: list[str]) -> None:
    for needed in ("go.mod", "go.sum", "cmd/coderun-rpc/main.go", "internal/buildinfo/buildinfo.go", "py/bootstrap.py"):
        assert (REPO / needed).exists() and not ignored(needed, dockerignore), needed
    assert ignored(".git", dockerignore) and ignored("clients/ts/node_modules/x", dockerignore)


def test_build_stage_builds_like_make_dist(stages: list[Stage]) -> None:
    build = stages[0]
    go = re.fullmatch(r"golang:(\d+\.\d+)\S*", build.image)
    assert go, build.image
    want = re.search(r"^go (\d+\.\d+)", (REPO / "go.mod").read_text(), re.MULTILINE)
    assert want and go.group(1) == want.group(1), "the Go image must match go.mod's go line"
    runs = " ".join(build.all("RUN"))
    for part in ("CGO_ENABLED=0", "-trimpath", "-s -w", f"{dist.BUILDINFO}.version=", f"{dist.BUILDINFO}.commit=", "./cmd/coderun-rpc",
                 "-tags sandboxinit", f"-o {dist.LEANINIT.relative_to(dist.REPO)} ./cmd/coderun-sandbox-init"):
        assert part in runs, part


def test_final_image_runs_the_daemon_as_a_user_with_a_health_check(stages: list[Stage]) -> None:
    final = stages[-1]
    assert final.image.startswith("python:") and "slim" in final.image
    users = final.all("USER")
    assert users and users[-1] not in ("root", "0"), users
    health = final.all("HEALTHCHECK")
    assert len(health) == 1 and re.search(r'CMD \["coderun-rpc", "--check"\]$', health[0]), health
    assert final.all("ENTRYPOINT") == ['["coderun-rpc"]']
