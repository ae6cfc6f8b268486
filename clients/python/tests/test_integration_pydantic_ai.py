"""coderun.integrations.pydantic_ai end to end: pydantic-ai's FunctionModel drives the code tool,
whose program calls two host tools through the real daemon and returns a chart."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, BinaryContent, Tool  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from coderun import Client  # noqa: E402
from coderun.integrations.pydantic_ai import code_mode  # noqa: E402

from conftest import CHART_PROGRAM, PNG_MAGIC, assert_chart_text, code_daemon, daemon_binary  # noqa: E402

pytestmark = pytest.mark.skipif(daemon_binary() is None, reason="daemon not built (make build)")


def get_temperature(city: str) -> int:
    """The temperature in a city, in °C."""
    return {"Paris": 21}.get(city, 0)


async def get_humidity(city: str) -> int:
    """The relative humidity in a city, in percent."""
    return {"Oslo": 80}.get(city, 0)


HOST_TOOLS = [get_temperature, Tool(get_humidity, name="get-humidity")]


def scripted(program: str, returns: list[Any], seen_tools: list[ToolCallPart] | None = None) -> FunctionModel:
    """A model that calls the code tool with ``program`` once per run, then answers with the
    tool's result (kept in ``returns``)."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            returns.append(last.content)
            return ModelResponse(parts=[TextPart("done")])
        assert [t.name for t in info.function_tools] == ["run_python"]
        return ModelResponse(parts=[ToolCallPart("run_python", {"program": program})])

    return FunctionModel(model)


async def test_agent_runs_a_program_calling_two_tools_and_sees_its_chart() -> None:
    returns: list[Any] = []
    descriptions: list[str] = []
    toolset = code_mode(HOST_TOOLS, daemon=code_daemon(), limits={"maxWallMs": 20000})

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        descriptions.append(info.function_tools[0].description or "")
        return scripted(CHART_PROGRAM, returns).function(messages, info)  # type: ignore[misc,return-value]

    agent = Agent(FunctionModel(model), toolsets=[toolset])
    async with agent:
        first = await agent.run("chart it")
        second = await agent.run("again", message_history=first.all_messages())
    assert first.output == second.output == "done"
    for seen, content in enumerate(returns, 1):
        text, image = content
        assert_chart_text(text, seen)  # one session for the agent: the counter grew
        assert isinstance(image, BinaryContent) and image.media_type == "image/png"
        assert image.data.startswith(PNG_MAGIC)
    stubs = descriptions[0]
    assert "async def get_temperature(self, city: str) -> Any:" in stubs
    assert 'tools["get-humidity"]' in stubs
    assert "20000" in stubs  # the header states the run's wall budget


async def test_fresh_interpreter_per_call_when_asked() -> None:
    returns: list[Any] = []
    agent = Agent(scripted(CHART_PROGRAM, returns), toolsets=[code_mode(HOST_TOOLS, session=False, daemon=code_daemon())])
    async with agent:
        await agent.run("one")
        await agent.run("two")
    assert_chart_text(returns[0][0], 1)
    assert_chart_text(returns[1][0], 1)


async def test_daemon_starts_on_first_use_and_closes_with_the_agent() -> None:
    started: list[Client] = []
    factory = code_daemon()

    async def start() -> Client:
        started.append(await factory())
        return started[-1]

    toolset = code_mode(HOST_TOOLS, daemon=start)
    agent = Agent(scripted("return 1", []), toolsets=[toolset])
    assert started == []
    await agent.run("go")
    assert len(started) == 1 and started[0].closed
    proc = started[0].process
    assert proc is not None and proc.returncode is not None


async def test_cancelling_the_agent_run_cancels_the_program() -> None:
    began = asyncio.Event()
    loop = asyncio.get_running_loop()

    def started() -> str:
        loop.call_soon_threadsafe(began.set)
        return "ok"

    program = "await tools.started()\nimport time\nwhile True: time.sleep(0.01)"
    toolset = code_mode([started], daemon=code_daemon())
    agent = Agent(scripted(program, []), toolsets=[toolset])
    async with agent:
        task = asyncio.ensure_future(agent.run("spin"))
        await began.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        client = toolset.code._client
        assert client is not None and client._runs == {}  # the daemon answered: the child is stopped
