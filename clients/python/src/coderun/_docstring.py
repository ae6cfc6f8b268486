"""Google-style docstrings, read for what a binding declares (I/O-free).

Only what the schema needs: the prose before the first section (the function's description),
the entries of the ``Args:`` block (one description per parameter), and the ``Returns:`` text.
Anything else (``Raises:``, ``Examples:`` …) is left out: the model sees the schema, not the
host's implementation notes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

_SECTION = re.compile(r"^(\w+(?: \w+)?):\s*$")
_ARGS_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_RETURNS_SECTIONS = {"returns", "return"}
# "name: text", "name (type): text", "*args: text" — the entry's first line in an Args block.
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True)
class Docstring:
    description: str = ""
    params: dict[str, str] = field(default_factory=dict)
    returns: str = ""


def parse_docstring(doc: str | None) -> Docstring:
    """Split a cleaned docstring (``inspect.getdoc``) into description, Args and Returns.

    A section starts at a line such as ``Args:`` alone on its line; its body is the following
    indented lines. Lines of the description are kept as written (paragraphs included)."""
    if not doc:
        return Docstring()
    prose: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line)
        if header is not None:
            current = sections.setdefault(header.group(1).lower(), [])
        elif current is None:
            prose.append(line)
        elif line.strip() and not line[0].isspace():
            current = None  # unindented text after a section ends it
            prose.append(line)
        else:
            current.append(line)
    return Docstring(
        description="\n".join(prose).strip(),
        params=_entries(_first(sections, _ARGS_SECTIONS)),
        returns=" ".join(line.strip() for line in _first(sections, _RETURNS_SECTIONS) if line.strip()),
    )


def _first(sections: dict[str, list[str]], names: set[str]) -> list[str]:
    lines: list[str] = []
    for name in sections:
        if name in names:
            lines.extend(sections[name])
    return lines


def _entries(lines: list[str]) -> dict[str, str]:
    """The ``name: text`` entries of an Args block; deeper-indented lines continue the entry."""
    entries: dict[str, list[str]] = {}
    indent: int | None = None
    name: str | None = None
    for line in lines:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        entry = _ENTRY.match(line.strip())
        if entry is not None and (indent is None or depth <= indent):
            indent, name = depth, entry.group(1)
            entries[name] = [entry.group(2).strip()]
        elif name is not None:
            entries[name].append(line.strip())
    return {k: " ".join(p for p in parts if p) for k, parts in entries.items()}
