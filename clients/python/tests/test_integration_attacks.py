"""What an adapter passes between the model, the framework and the daemon, attacked: tool names
that are not identifiers or repeat, schemas that lie or that the daemon refuses, arguments of the
wrong shape, huge results, names that shadow the step's own."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("smolagents")
pytest.importorskip("agents")

from agents import function_tool  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402
from langchain_core.tools import StructuredTool, tool  # noqa: E402
from smolagents import tool as smol_tool  # noqa: E402

from coderun import InvalidParams  # noqa: E402
from coderun.integrations import langchain, openai_agents  # noqa: E402
from coderun.integrations.smolagents import CoderunExecutor  # noqa: E402

from conftest import code_daemon, daemon_binary  # noqa: E402

pytestmark = pytest.mark.skipif(daemon_binary() is None, reason="daemon not built (make build)")


def lc_tool(name: str, schema: dict[str, Any], fn: Any = None) -> StructuredTool:
    return StructuredTool.from_function(func=fn or (lambda **kw: kw), name=name, description="d",
                                        args_schema=schema)


OBJ = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def test_odd_tool_names_reach_their_tools_and_nothing_else() -> None:
    names = ['a"]\nimport os', "🙂", "__class__", "for", "x y"]
    tools = [lc_tool(n, OBJ, (lambda n: lambda x: f"{n}:{x}")(n)) for n in names]
    run = langchain.code_tool(tools, daemon=code_daemon(), session=False)
    try:
        program = "return [await tools[n](x=1) for n in %r]" % (names,)
        out = run.invoke({"program": program})
        assert out == "value: " + json.dumps([f"{n}:1" for n in names], ensure_ascii=False, separators=(",", ":"))
    finally:
        langchain.close_code_tool(run)


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="two tools are named 'a'"):
        langchain.code_tool([lc_tool("a", OBJ), lc_tool("a", OBJ)], daemon=code_daemon())


def test_a_schema_the_daemon_refuses_fails_when_the_tool_is_made_naming_it() -> None:
    bad = {"type": "object", "properties": {"x": {"type": "string", "pattern": "(?=lookahead)"}}}  # not RE2
    with pytest.raises(InvalidParams, match=r"bindings\[0\]\.functions\[0\]\.parameters"):
        langchain.code_tool([lc_tool("fetch", bad)], daemon=code_daemon())
    with pytest.raises(InvalidParams, match="object schema"):
        langchain.code_tool([lc_tool("arr", {"type": "array"})], daemon=code_daemon())


def test_a_schema_that_lies_is_checked_before_the_host_is_called() -> None:
    called: list[Any] = []

    def record(**kw: Any) -> Any:
        called.append(kw)
        return "ok"

    run = langchain.code_tool([lc_tool("f", OBJ, record)], daemon=code_daemon())
    try:
        out = run.invoke({"program": "try:\n    await tools.f(x='not an int')\nexcept TypeError as e:\n    return str(e)"})
        assert "invalid arguments: /x: expected integer" in out and called == []
    finally:
        langchain.close_code_tool(run)


def test_arguments_of_the_wrong_shape_are_the_models_to_fix() -> None:
    run = langchain.code_tool([lc_tool("f", OBJ)], daemon=code_daemon())
    try:
        for bad in ({"program": 3}, {}, {"program": ["x"]}):
            out = run.invoke(bad)  # a message for the model, not an exception in the host
            assert out == 'run_python: arguments must be {"program": "<python>"}'
    finally:
        langchain.close_code_tool(run)

    @function_tool
    def g(x: int) -> int:
        """g"""
        return x

    oa = openai_agents.code_tool([g], daemon=code_daemon())
    try:
        import asyncio

        for bad in ("not json", "[1]", '{"program": 3}'):
            ctx = ToolContext(None, tool_name="run_python", tool_call_id="c", tool_arguments=bad)
            out = asyncio.run(oa.on_invoke_tool(ctx, bad))
            assert out.startswith('run_python: arguments must be {"program": "<python>"}')
    finally:
        openai_agents.close_code_tool(oa)


def test_huge_results_stay_within_the_budgets() -> None:
    run = langchain.code_tool([lc_tool("big", {"type": "object", "properties": {}}, lambda: "z" * 20_000_000)],
                              daemon=code_daemon(), limits={"maxLogBytes": 4096, "maxValueBytes": 1024})
    try:
        out = run.invoke({"program": "s = await tools.big()\nprint(s)\nreturn len(s)"})
        assert out.endswith("value: 20000000") and len(out.encode()) < 4096 + 1024
        out = run.invoke({"program": "return 'y' * 10_000_000"})
        assert out.startswith("error (output-limit)") and len(out.encode()) < 1024
    finally:
        langchain.close_code_tool(run)


@smol_tool
def tools(q: str) -> str:
    """A tool whose name is the adapters' usual global.

    Args:
        q: anything
    """
    return "tools:" + q


@smol_tool
def other(q: str) -> str:
    """Another tool.

    Args:
        q: anything
    """
    return "other:" + q


def test_smolagents_names_cannot_take_over_the_step() -> None:
    ex = CoderunExecutor(daemon=code_daemon())
    try:
        ex.send_tools({"tools": tools, "other": other})
        ex.send_variables({"_coderun_sync": 1, "final_answer": 2, "kept": 3})
        assert ex("other = None\ntools('a')").output == "tools:a"
        # the step's helpers and tools come back each step, whatever the code or the variables did
        assert ex("[other('b'), kept]").output == ["other:b", 3]
    finally:
        ex.cleanup()
