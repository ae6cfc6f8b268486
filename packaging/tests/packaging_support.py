"""Helpers of the packaging tests: the dist module (packaging/dist.py), and a user's environment.

(A module of its own, not conftest: clients/python/tests has a conftest too, and both may be
collected in one pytest run.)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

PACKAGING = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dist", PACKAGING / "dist.py")
assert _spec is not None and _spec.loader is not None
dist = importlib.util.module_from_spec(_spec)
sys.modules["dist"] = dist
_spec.loader.exec_module(dist)


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
