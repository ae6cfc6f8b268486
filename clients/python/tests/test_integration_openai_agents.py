"""coderun.integrations.openai_agents end to end: a scripted Model drives an Agent whose code
tool runs a program calling two function tools through the real daemon and returning a chart."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, FunctionTool, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

from coderun import Client  # noqa: E402
from coderun.integrations.openai_agents import close_code_tool, code_tool  # noqa: E402

from conftest import CHART_PROGRAM, PNG_MAGIC, assert_chart_text, code_daemon, daemon_binary  # noqa: E402

set_tracing_disabled(True)  # nothing is exported from a test

pytestmark = pytest.mark.skipif(daemon_binary() is None, reason="daemon not built (make build)")


@function_tool
def get_temperature(city: str) -> int:
    """The temperature in a city, in °C."""
    return {"Paris": 21}.get(city, 0)


@function_tool(name_override="get-humidity")
async def get_humidity(city: str) -> int:
    """The relative humidity in a city, in percent."""
    return {"Oslo": 80}.get(city, 0)


class Scripted(Model):
    """Calls run_python with ``program`` when the last input item is not its output; then
    answers "done". Keeps each tool output it is given and each tool list it is offered."""

    def __init__(self, program: str) -> None:
        self.program = program
        self.outputs: list[Any] = []
        self.tools: list[Any] = []
        self.calls = 0

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
                           output_schema: Any, handoffs: Any, tracing: Any, **_: Any) -> ModelResponse:
        self.tools.append(tools)
        last = input[-1] if isinstance(input, list) else {}
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            self.outputs.append(last["output"])
            msg = ResponseOutputMessage(id="m", type="message", role="assistant", status="completed",
                                        content=[ResponseOutputText(type="output_text", text="done", annotations=[])])
            return ModelResponse(output=[msg], usage=Usage(), response_id=None)
        self.calls += 1
        import json
        call = ResponseFunctionToolCall(type="function_call", name="run_python", call_id=f"call{self.calls}",
                                        arguments=json.dumps({"program": self.program}), id=f"fc{self.calls}")
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError


async def test_agent_runs_a_program_calling_two_tools_and_sees_its_chart() -> None:
    run_python = code_tool([get_temperature, get_humidity], daemon=code_daemon(), limits={"maxWallMs": 20000})
    try:
        model = Scripted(CHART_PROGRAM)
        agent = Agent(name="analyst", model=model, tools=[run_python])
        first = await Runner.run(agent, "chart it")
        second = await Runner.run(agent, first.to_input_list() + [{"role": "user", "content": "again"}])
        assert first.final_output == second.final_output == "done"
        (offered,) = model.tools[0]
        assert isinstance(offered, FunctionTool) and offered.name == "run_python"
        assert "async def get_temperature(self, city: str) -> Any:" in offered.description
        assert 'tools["get-humidity"]' in offered.description and "20000" in offered.description
        assert len(model.outputs) == 2
        for seen, output in enumerate(model.outputs, 1):
            text, image = output
            assert text["type"] == "input_text"
            assert_chart_text(text["text"], seen)  # one session across the model's turns
            assert image["type"] == "input_image"
            prefix = "data:image/png;base64,"
            assert image["image_url"].startswith(prefix)
            assert base64.b64decode(image["image_url"][len(prefix):]).startswith(PNG_MAGIC)
    finally:
        close_code_tool(run_python)


async def test_fresh_runs_and_the_daemon_closes_with_close_code_tool() -> None:
    started: list[Client] = []
    factory = code_daemon()

    async def start() -> Client:
        started.append(await factory())
        return started[-1]

    run_python = code_tool([get_temperature], session=False, daemon=start)
    model = Scripted("x = globals().get('x', 0) + 1\nreturn x")
    agent = Agent(name="counter", model=model, tools=[run_python])
    await Runner.run(agent, "one")
    await Runner.run(agent, "two")
    assert model.outputs == ["value: 1", "value: 1"]
    close_code_tool(run_python)
    assert len(started) == 1 and started[0].closed


async def test_cancelling_the_run_cancels_the_program() -> None:
    began = asyncio.Event()
    loop = asyncio.get_running_loop()

    @function_tool
    def started() -> str:
        """Say the program started."""
        loop.call_soon_threadsafe(began.set)
        return "ok"

    # a run left going would hold the session past the test's own timeout
    run_python = code_tool([started], daemon=code_daemon(), limits={"maxWallMs": 120000})
    try:
        model = Scripted("await tools.started()\nimport time\nwhile True: time.sleep(0.01)")
        task = asyncio.ensure_future(Runner.run(Agent(name="spin", model=model, tools=[run_python]), "spin"))
        await began.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the SDK cancels its tool task without waiting for it: the session's next run starts
        # once the cancelled program has been stopped
        after = Scripted("return 7")
        await Runner.run(Agent(name="next", model=after, tools=[run_python]), "next")
        assert after.outputs == ["value: 7"]
    finally:
        close_code_tool(run_python)
