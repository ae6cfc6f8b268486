"""coderun.integrations.langchain end to end: a LangChain fake chat model asks for the code
tool, whose program calls two LangChain tools through the real daemon and returns a chart."""

from __future__ import annotations

import asyncio
import base64
import gc
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import StructuredTool, tool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

from coderun import Client  # noqa: E402
from coderun.integrations.langchain import close_code_tool, code_tool  # noqa: E402

from conftest import CHART_PROGRAM, PNG_MAGIC, assert_chart_text, code_daemon, daemon_binary  # noqa: E402

pytestmark = pytest.mark.skipif(daemon_binary() is None, reason="daemon not built (make build)")


@tool
def get_temperature(city: str) -> int:
    """The temperature in a city, in °C."""
    return {"Paris": 21}.get(city, 0)


async def _humidity(city: str) -> int:
    return {"Oslo": 80}.get(city, 0)


get_humidity = StructuredTool.from_function(coroutine=_humidity, name="get-humidity",
                                            description="The relative humidity in a city, in percent.")


def call(program: str, n: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "run_python", "args": {"program": program}, "id": f"c{n}"}])


async def agent_turn(model: FakeMessagesListChatModel, tools: dict[str, Any], messages: list[BaseMessage]) -> list[ToolMessage]:
    """One turn of a tool-calling loop: the model's tool calls run, their messages are kept."""
    ai = await model.ainvoke(messages)
    messages.append(ai)
    out: list[ToolMessage] = []
    for tc in getattr(ai, "tool_calls", []):
        out.append(await tools[tc["name"]].ainvoke({**tc, "type": "tool_call"}))
    messages.extend(out)
    return out


async def test_fake_chat_model_runs_a_program_calling_two_tools_and_sees_its_chart() -> None:
    run_python = code_tool([get_temperature, get_humidity], daemon=code_daemon(), limits={"maxWallMs": 20000})
    try:
        spec = convert_to_openai_tool(run_python)["function"]
        assert spec["name"] == "run_python" and spec["parameters"]["required"] == ["program"]
        assert "async def get_temperature(self, city: str) -> Any:" in spec["description"]
        assert 'tools["get-humidity"]' in spec["description"] and "20000" in spec["description"]
        model = FakeMessagesListChatModel(responses=[call(CHART_PROGRAM, 1), call(CHART_PROGRAM, 2)])
        messages: list[BaseMessage] = [HumanMessage("chart it")]
        for seen in (1, 2):
            (msg,) = await agent_turn(model, {"run_python": run_python}, messages)
            text, image = msg.content
            assert isinstance(text, dict) and isinstance(image, dict)
            assert_chart_text(text["text"], seen)  # one session across the model's turns
            assert image["type"] == "image" and image["mime_type"] == "image/png"
            assert base64.b64decode(image["base64"]).startswith(PNG_MAGIC)
    finally:
        close_code_tool(run_python)


def test_sync_invoke_and_fresh_runs() -> None:
    run_python = code_tool([get_temperature, get_humidity], session=False, daemon=code_daemon())
    try:
        for _ in range(2):
            out = run_python.invoke({"program": "x = globals().get('x', 0) + 1\nreturn x"})
            assert out == "value: 1"
    finally:
        close_code_tool(run_python)


async def test_daemon_closes_with_the_tool() -> None:
    started: list[Client] = []
    factory = code_daemon()

    async def start() -> Client:
        started.append(await factory())
        return started[-1]

    run_python = code_tool([get_temperature], daemon=start)
    assert await run_python.ainvoke({"program": "return 2"}) == "value: 2"
    del run_python
    gc.collect()
    assert len(started) == 1 and started[0].closed


async def test_cancelling_ainvoke_cancels_the_program() -> None:
    began = asyncio.Event()
    loop = asyncio.get_running_loop()

    @tool
    def started() -> str:
        """Say the program started."""
        loop.call_soon_threadsafe(began.set)
        return "ok"

    run_python = code_tool([started], daemon=code_daemon())
    try:
        task = asyncio.ensure_future(run_python.ainvoke(
            {"program": "await tools.started()\nimport time\nwhile True: time.sleep(0.01)"}))
        await began.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        from coderun.integrations.langchain import _MODES
        client = _MODES.of(run_python)._client
        assert client is not None and client._runs == {}  # the daemon answered: the child is stopped
    finally:
        close_code_tool(run_python)


def test_tool_functions_have_evaluated_annotations() -> None:
    """C1164: LangChain reads the code tool's functions' type hints on every call: they are
    objects, not strings it would compile each time (a tenth of a millisecond per call)."""
    tool = code_tool([get_temperature], daemon=code_daemon())
    try:
        for fn in (tool.func, tool.coroutine):
            assert fn is not None and not any(isinstance(a, str) for a in fn.__annotations__.values())
    finally:
        close_code_tool(tool)
