"""The framework adapters' overhead over the client's own run, in the same run (make bench).

For each adapter, the code tool's call as its framework makes it (pydantic-ai's ``call_tool``,
LangChain's ``ainvoke``, the Agents SDK's ``on_invoke_tool``, a smolagents executor step) is
timed against ``Session.run`` of ``return 1`` by the same client on the same daemon, interleaved;
the client's run is timed on the client's own event loop, so the adapter's hops between loops
count as overhead. One more pair times a host tool call from a program: through the adapter
(back to the caller's loop) against a binding of the client's own. Prints one JSON array of
rows ``{metric, unit, floor, daemon, note}``, the floor being the client's own figure. Target:
at most 1 ms more per code tool call.

    python clients/python/bench/adapters.py --daemon bin/coderun-rpc [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from coderun import Client, Session  # noqa: E402
from coderun.integrations import CodeMode, HostTool  # noqa: E402

Clock = Callable[[], Awaitable[float]]
"""One timed call: returns its duration in ms."""


def timed(fn: Callable[[], Awaitable[Any]]) -> Clock:
    async def clock() -> float:
        t = time.perf_counter()
        await fn()
        return (time.perf_counter() - t) * 1000
    return clock


async def own_clock(code: CodeMode, program: str, bindings: Any = None) -> Clock:
    """The client's own ``Session.run`` of ``program``, timed on the client's loop."""

    async def open_session() -> Session:
        return await (await code._daemon()).open_session()

    session = await code._bridge(open_session())

    async def on_client_loop() -> float:
        t = time.perf_counter()
        await session.run(program, bindings=bindings)
        return (time.perf_counter() - t) * 1000

    async def clock() -> float:
        return await code._bridge(on_client_loop())
    return clock


async def pair(own: Clock, adapter: Clock, samples: int) -> tuple[float, float]:
    """Median ms of ``own`` and ``adapter``, interleaved after one warm-up each."""
    await own()
    await adapter()
    a: list[float] = []
    b: list[float] = []
    for _ in range(samples):
        a.append(await own())
        b.append(await adapter())
    return statistics.median(a), statistics.median(b)


def row(metric: str, own: float, adapter: float, note: str) -> dict[str, Any]:
    return {"metric": metric, "unit": "ms", "floor": round(own, 3), "daemon": round(adapter, 3),
            "note": f"{note}; overhead {adapter - own:+.3f} ms (target ≤ 1 ms)"}


async def _noop(program: str) -> str:
    return program


def echo(x: int) -> int:
    """Return x."""
    return x


async def core_rows(start: Callable[[], Awaitable[Client]], samples: int, calls: int) -> list[dict[str, Any]]:
    code = CodeMode(daemon=start)

    async def call(arguments: dict[str, Any]) -> Any:
        return echo(**arguments)

    tools = [HostTool("echo", "Return x.", {"type": "object", "properties": {"x": {"type": "integer"}}}, call)]
    o, a = await pair(await own_clock(code, "return 1"), timed(lambda: code.run("return 1", tools)), samples)
    rows = [row("code tool call: CodeMode.run vs Session.run (return 1)", o, a, "the shared core")]
    program = f"for i in range({calls}):\n    await tools.echo(x=i)\nreturn 1"
    own = await own_clock(code, program, {"tools": {"echo": echo}})
    o, a = await pair(own, timed(lambda: code.run(program, tools)), samples)
    rows.append(row(f"host tool call from a program (per call, {calls} in a run)", o / calls, a / calls,
                    "via the caller's loop vs the client's own binding"))
    await code.aclose()
    return rows


async def framework_rows(start: Callable[[], Awaitable[Client]], samples: int) -> list[dict[str, Any]]:
    rows = []

    from pydantic_ai._run_context import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    from coderun.integrations.pydantic_ai import code_mode
    toolset = code_mode([echo], daemon=start)
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    tool = (await toolset.get_tools(ctx))["run_python"]
    adapter = timed(lambda: toolset.call_tool("run_python", {"program": "return 1"}, ctx, tool))
    o, a = await pair(await own_clock(toolset.code, "return 1"), adapter, samples)
    rows.append(row("code tool call: pydantic-ai call_tool vs Session.run (return 1)", o, a, "pydantic-ai"))
    await toolset.code.aclose()

    from langchain_core.tools import StructuredTool
    from langchain_core.tools import tool as lc_tool

    from coderun.integrations import langchain
    lc = langchain.code_tool([lc_tool(echo)], daemon=start)
    adapter = timed(lambda: lc.ainvoke({"program": "return 1"}))
    o, a = await pair(await own_clock(langchain._MODES.of(lc), "return 1"), adapter, samples)
    rows.append(row("code tool call: LangChain ainvoke vs Session.run (return 1)", o, a, "LangChain"))
    noop = StructuredTool(name="noop", description="d", args_schema=langchain._Program, coroutine=_noop)
    f = statistics.median([await timed(lambda: noop.ainvoke({"program": "return 1"}))() for _ in range(samples)])
    rows.append({"metric": "LangChain ainvoke of a no-op tool with the same arguments", "unit": "ms",
                 "daemon": round(f, 3), "note": "LangChain's own cost of a tool call, part of the row above"})
    langchain.close_code_tool(lc)

    from agents import function_tool
    from agents.tool_context import ToolContext

    from coderun.integrations import openai_agents
    oa = openai_agents.code_tool([function_tool(echo)], daemon=start)
    args = json.dumps({"program": "return 1"})
    tctx = ToolContext(None, tool_name="run_python", tool_call_id="bench", tool_arguments=args)
    adapter = timed(lambda: oa.on_invoke_tool(tctx, args))
    o, a = await pair(await own_clock(openai_agents._MODES.of(oa), "return 1"), adapter, samples)
    rows.append(row("code tool call: Agents SDK on_invoke_tool vs Session.run (return 1)", o, a, "OpenAI Agents SDK"))
    openai_agents.close_code_tool(oa)

    from coderun.integrations.smolagents import CoderunExecutor
    ex = CoderunExecutor(daemon=start)
    ex.send_tools({})

    async def step() -> None:
        ex("1")  # synchronous, as CodeAgent calls it
    o, a = await pair(await own_clock(ex.code, "return 1"), timed(step), samples)
    rows.append(row("code step: smolagents executor vs Session.run (return 1)", o, a,
                    "smolagents (the step's prelude and worker thread in the child included)"))
    ex.cleanup()
    return rows


async def measure(daemon: str, samples: int, calls: int, frameworks: bool) -> list[dict[str, Any]]:
    def start() -> Awaitable[Client]:
        return Client.start(daemon, env={"CODERUN_PYTHON_BIN": sys.executable, "CODERUN_LOG_LEVEL": "warn"})
    rows = await core_rows(start, samples, calls)
    return rows + await framework_rows(start, samples) if frameworks else rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--daemon", required=True)
    p.add_argument("--quick", action="store_true",
                   help="tiny counts and the shared core only: a smoke test that imports no framework (they take seconds)")
    args = p.parse_args()
    samples, calls = (1, 2) if args.quick else (200, 100)
    print(json.dumps(asyncio.run(measure(args.daemon, samples, calls, not args.quick)), indent=1))


if __name__ == "__main__":
    main()
