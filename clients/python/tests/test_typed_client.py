"""Typed bindings on the wire, against the scripted in-memory daemon: what ``run`` and
``describe`` send, and how a ``binding/call`` reaches a typed function."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from coderun import ProtocolViolation, binding

from fakedaemon import FakeDaemon, ok
from test_client_fake import call


@dataclasses.dataclass
class Hit:
    url: str
    score: float = 0.0


def search(query: str, limit: int = 3) -> list[Hit]:
    """Search the web.

    Args:
        query: Words to look for.
    """
    return [Hit(f"https://example.com/{query}/{i}") for i in range(limit)]


SEARCH_DECL = {
    "name": "search",
    "description": "Search the web.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for."},
            "limit": {"type": "integer", "default": 3},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "returns": {
        "type": "array",
        "items": {
            "type": "object",
            "title": "Hit",
            "properties": {"url": {"type": "string"}, "score": {"type": "number", "default": 0.0}},
            "required": ["url"],
            "additionalProperties": False,
        },
    },
}


async def test_run_declares_typed_and_untyped_functions_and_calls_by_name() -> None:
    d = FakeDaemon()
    c = await d.connect()
    task = asyncio.ensure_future(c.run("...", bindings={"tools": {"search": search, "echo": lambda a: a}}))
    req = await d.recv()
    assert req["params"]["bindings"] == [{"global": "tools", "functions": [SEARCH_DECL, "echo"]}]
    d.send(call(100, req["id"], "search", {"query": "q", "limit": 2}))
    assert (await d.recv())["result"] == [
        {"url": "https://example.com/q/0", "score": 0.0},
        {"url": "https://example.com/q/1", "score": 0.0},
    ]
    d.send(call(101, req["id"], "echo", {"limit": 2}))
    assert (await d.recv())["result"] == {"limit": 2}
    d.send(call(102, req["id"], "search", {"query": "q", "bogus": 1}))
    reply = await d.recv()
    assert reply["error"]["code"] == -32000 and "bogus" in reply["error"]["message"]
    d.send(call(103, req["id"], "search", ["q"]))
    reply = await d.recv()
    assert "arrived as list, not an object" in reply["error"]["message"]
    d.result(req["id"], ok(None))
    assert (await task).ok
    await c.close(shutdown_timeout=0.1)  # the fake daemon does not answer shutdown


async def test_async_typed_binding_and_decorated_override() -> None:
    @binding(returns={"type": "string", "maxLength": 5})
    async def shout(text: str, *, times: int = 1) -> str:
        await asyncio.sleep(0)
        return text.upper() * times

    d = FakeDaemon()
    c = await d.connect()
    task = asyncio.ensure_future(c.run("...", bindings={"t": {"shout": shout}}))
    req = await d.recv()
    (decl,) = req["params"]["bindings"][0]["functions"]
    assert decl["returns"] == {"type": "string", "maxLength": 5}
    assert decl["parameters"]["required"] == ["text"]
    d.send(call(7, req["id"], "shout", {"text": "ab", "times": 2}, ns="t"))
    assert (await d.recv())["result"] == "ABAB"
    d.result(req["id"], ok(None))
    await task
    await c.close(shutdown_timeout=0.1)  # the fake daemon does not answer shutdown


def opaque(when: complex) -> None: ...


async def test_registration_error_names_the_entry_and_sends_nothing() -> None:
    d = FakeDaemon()
    c = await d.connect()
    with pytest.raises(TypeError, match=r"bindings\['tools'\]\['when'\]: opaque\(\): parameter 'when' has no JSON Schema"):
        await c.run("...", bindings={"tools": {"when": opaque}})
    with pytest.raises(TypeError, match="bindings\\['tools'\\]\\['when'\\]"):
        await c.describe(bindings={"tools": {"when": opaque}})
    assert d.writer.inbox.empty()
    await c.close(shutdown_timeout=0.1)  # the fake daemon does not answer shutdown


async def test_describe_sends_the_run_declarations_and_returns_the_stubs() -> None:
    d = FakeDaemon()
    c = await d.connect()
    task = asyncio.ensure_future(
        c.describe(
            bindings={"tools": {"search": search}},
            error_classes={"tools": ("ToolError", "tool")},
            limits={"maxWallMs": 1000},
        )
    )
    req = await d.recv()
    assert req["method"] == "bindings/describe"
    assert req["params"] == {
        "bindings": [
            {"global": "tools", "functions": [SEARCH_DECL], "errorClass": {"name": "ToolError", "memberNameProperty": "tool"}}
        ],
        "limits": {"maxWallMs": 1000},
    }
    d.result(req["id"], {"stubs": "class Tools: ...\n"})
    assert await task == "class Tools: ...\n"

    task = asyncio.ensure_future(c.describe())
    req = await d.recv()
    assert req["params"] == {"bindings": []}
    d.result(req["id"], {"stubs": 1})
    with pytest.raises(ProtocolViolation, match="without stubs text"):
        await task
    await c.close(shutdown_timeout=0.1)  # the fake daemon does not answer shutdown

