"""Typed bindings against the real built daemon (CODERUN_RPC_BIN, or bin/coderun-rpc): the
declaration derived here is what the daemon validates with and renders as stubs."""

from __future__ import annotations

import ast
import dataclasses
from typing import Any, Literal, Optional

import pytest

from coderun import InvalidParams, binding

from conftest import daemon_binary
from test_integration import start, value

pytestmark = pytest.mark.skipif(daemon_binary() is None, reason="daemon not built (make build)")


@dataclasses.dataclass
class Hit:
    doc: str
    score: float = 1.0


@dataclasses.dataclass
class Filter:
    prefix: str
    exclude: list[str] = dataclasses.field(default_factory=list)


DOCS = ["alpha", "alps", "beta", "alpine"]


class Corpus:
    """Host functions that count their calls, so a test can tell the host was never reached."""

    def __init__(self) -> None:
        self.calls = 0

    def search(self, query: str, limit: int = 2, mode: Literal["prefix", "substring"] = "prefix", only: Optional[Filter] = None) -> list[Hit]:
        """Search the corpus.

        Args:
            query: Text to look for.
            limit: At most this many hits.
            mode: Where the text must occur.
            only: Keep documents with this prefix, minus the excluded ones.
        """
        self.calls += 1
        assert only is None or isinstance(only, Filter), "a dataclass parameter arrives built"
        found = [d for d in DOCS if (d.startswith(query) if mode == "prefix" else query in d)]
        if only is not None:
            found = [d for d in found if d.startswith(only.prefix) and d not in only.exclude]
        return [Hit(d, 1.0 / (i + 1)) for i, d in enumerate(found[:limit])]


async def test_typed_round_trip_positional_keyword_and_dataclass() -> None:
    corpus = Corpus()
    program = (
        "a = await tools.search('al')\n"
        "b = await tools.search(query='a', limit=5, mode='substring', only={'prefix': 'al', 'exclude': ['alps']})\n"
        "c = await tools.echo(q=1)\n"
        "return [a, b, c]"
    )
    async with await start() as c:
        r = await c.run(program, bindings={"tools": {"search": corpus.search, "echo": lambda a: a}})
    assert value(r) == [
        [{"doc": "alpha", "score": 1.0}, {"doc": "alps", "score": 0.5}],
        [{"doc": "alpha", "score": 1.0}, {"doc": "alpine", "score": 0.5}],
        {"q": 1},
    ]
    assert corpus.calls == 2


async def test_describe_returns_stubs_the_model_can_read() -> None:
    async with await start() as c:
        stubs = await c.describe(bindings={"tools": {"search": Corpus().search}}, limits={"maxWallMs": 5000})
    ast.parse(stubs)
    for expected in ("class Tools", "async def search(self, query: str, limit: int = 2", "Search the corpus.", "Text to look for.", "tools: Tools", "5000"):
        assert expected in stubs, (expected, stubs)


async def test_wrong_arguments_never_reach_the_host() -> None:
    corpus = Corpus()
    program = (
        "out = []\n"
        "for call in (lambda: tools.search(5), lambda: tools.search('a', mode='fuzzy'), lambda: tools.search('a', extra=1),\n"
        "             lambda: tools.search(only={'exclude': []}, query='a')):\n"
        "    try:\n"
        "        await call()\n"
        "        out.append('called')\n"
        "    except TypeError as e:\n"
        "        out.append(str(e))\n"
        "return out"
    )
    async with await start() as c:
        r = await c.run(program, bindings={"tools": {"search": corpus.search}})
    messages = value(r)
    assert corpus.calls == 0, "the daemon refused every call before the host saw it"
    assert len(messages) == 4
    for message, where in zip(messages, ("/query", "/mode", "extra", "/only")):
        assert "tools.search" in message and where in message, messages


async def test_result_breaking_returns_raises_in_the_program() -> None:
    def count(word: str) -> int:
        return "many"  # type: ignore[return-value]

    lying = binding(lambda word: {"n": word}, returns={"type": "object", "required": ["count"]})
    program = (
        "out = []\n"
        "for f in (tools.count, tools.lying):\n"
        "    try:\n"
        "        await f('x')\n"
        "        out.append('accepted')\n"
        "    except RuntimeError as e:\n"
        "        out.append(str(e))\n"
        "return out"
    )
    async with await start() as c:
        r = await c.run(program, bindings={"tools": {"count": count, "lying": lying}})
    messages = value(r)
    assert len(messages) == 2 and "accepted" not in messages, messages
    assert all("schema" in m for m in messages), messages


async def test_invalid_declared_schema_is_refused_naming_its_path() -> None:
    bad = binding(lambda a: a, parameters={"type": "string"})
    async with await start() as c:
        with pytest.raises(InvalidParams, match=r"bindings\[0\]\.functions\[1\]\.parameters"):
            await c.run("return 1", bindings={"tools": {"ok": lambda a: a, "bad": bad}})
        with pytest.raises(InvalidParams, match=r"bindings\[0\]\.functions\[0\]\.parameters"):
            await c.describe(bindings={"tools": {"bad": bad}})
        assert value(await c.run("return 1")) == 1, "the daemon is still serving"


async def test_untyped_callable_keeps_one_value_with_declared_description() -> None:
    seen: list[Any] = []
    echo = binding(lambda a: seen.append(a) or a, description="Echo the value.")
    async with await start() as c:
        r = await c.run("return [await tools.echo([1, 2]), await tools.echo(k='v')]", bindings={"tools": {"echo": echo}})
    assert value(r) == [[1, 2], {"k": "v"}]
    assert seen == [[1, 2], {"k": "v"}]
