"""The framework pages (docs/integrations/python/*.md): each has a complete example of at most 20
lines that parses, and whatever it imports from coderun exists."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

PAGES = sorted((Path(__file__).resolve().parents[3] / "docs" / "integrations" / "python").glob("*.md"))
FRAMEWORKS = [p for p in PAGES if p.name != "README.md"]


def test_there_is_a_page_per_framework() -> None:
    assert [p.stem for p in FRAMEWORKS] == ["langchain", "openai-agents", "pydantic-ai", "smolagents"]


@pytest.mark.parametrize("page", FRAMEWORKS, ids=[p.stem for p in FRAMEWORKS])
def test_example_is_complete_and_short(page: Path) -> None:
    (example,) = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    assert len(example.strip("\n").splitlines()) <= 20
    tree = ast.parse(example)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("coderun"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module}.{alias.name}"
