"""OpenAI Agents SDK: the agent's function tools behind one ``FunctionTool`` that runs Python.

>>> agent = Agent(name="analyst", tools=[code_tool([get_weather, get_forecast])])

:func:`code_tool` takes ``FunctionTool``s (``@function_tool`` functions) and returns one
``FunctionTool``, ``run_python``, whose description holds the stubs of those tools (their SDK
JSON schemas). A program's ``await tools.get_weather(city="Paris")`` invokes the tool as the SDK
does (``on_invoke_tool``, with the run's context; the SDK's own failure handling turns a failing
tool into its error text). The output is :func:`coderun.model_text`'s text, then the displayed
images as ``ToolOutputImage`` data URLs.

The description needs the stubs, so the daemon starts when the tool is made; the session (one per
tool, kept across the model's turns) and the daemon close with :func:`close_code_tool` or when
the tool is garbage collected. Cancelling the agent's run cancels the program.
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any, Mapping, Optional, Sequence, Union

from agents import FunctionTool, ToolOutputImage, ToolOutputText
from agents.tool_context import ToolContext
from pydantic_core import to_jsonable_python

from ..modeltext import ModelText
from ..types import Limits
from ._core import PROGRAM_SCHEMA, CodeMode, DaemonFactory, HostTool, ToolModes

__all__ = ["code_tool", "close_code_tool"]

_MODES = ToolModes()
"""The CodeMode of each live tool made by code_tool."""


def code_tool(
    tools: Sequence[FunctionTool],
    *,
    session: bool = True,
    limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
    namespace: str = "tools",
    name: str = "run_python",
    daemon: Optional[DaemonFactory] = None,
) -> FunctionTool:
    """One ``FunctionTool`` over ``tools`` (see the module documentation). ``session=False``: a
    fresh interpreter per call; ``limits``: every run's budgets (also in the stubs' header);
    ``daemon``: how to start it (default ``Client.start``)."""
    for t in tools:
        if not isinstance(t, FunctionTool):
            raise TypeError(f"code_tool takes FunctionTools (@function_tool), not {type(t).__name__}")
    code = CodeMode(namespace=namespace, session=session, limits=limits, daemon=daemon)

    async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
        try:
            program = _program(arguments)
        except ValueError as e:
            return str(e)  # the model's mistake, for the model to fix
        return _output(await code.run(program, [_host_tool(t, ctx) for t in tools]))

    description = _MODES.describe(code, [_host_tool(t, None) for t in tools])
    tool = FunctionTool(name=name, description=description, params_json_schema=dict(PROGRAM_SCHEMA),
                        on_invoke_tool=invoke, strict_json_schema=True)
    _MODES.adopt(tool, code)
    return tool


def close_code_tool(tool: FunctionTool) -> None:
    """Close the session and the daemon of a tool made by :func:`code_tool` (idempotent; the
    next call starts them again)."""
    _MODES.close(tool)



def _program(arguments: str) -> str:
    """The program of the model's arguments (the SDK passes them as JSON text)."""
    try:
        parsed = json.loads(arguments)
    except ValueError as e:
        raise ValueError(f"run_python: arguments must be {{\"program\": \"<python>\"}}, not JSON: {e}") from None
    program = parsed.get("program") if isinstance(parsed, dict) else None
    if not isinstance(program, str):
        raise ValueError("run_python: arguments must be {\"program\": \"<python>\"}")
    return program


_calls = itertools.count(1)


def _host_tool(tool: FunctionTool, ctx: Optional[ToolContext[Any]]) -> HostTool:
    """``tool`` as the program calls it, invoked in the context of the code tool's call ``ctx``
    (None: described only)."""

    async def call(arguments: dict[str, Any]) -> Any:
        if ctx is None:
            raise RuntimeError("this tool is described, not callable")
        text = json.dumps(arguments)
        inner = ToolContext(ctx.context, ctx.usage, tool_name=tool.name,
                            tool_call_id=f"{ctx.tool_call_id}/{tool.name}/{next(_calls)}",
                            tool_arguments=text, agent=ctx.agent, run_config=ctx.run_config)
        return to_jsonable_python(await tool.on_invoke_tool(inner, text))

    return HostTool(tool.name, tool.description, tool.params_json_schema, call)


def _output(view: ModelText) -> Any:
    """The tool output: the text, then each image as a data URL."""
    if not view.images:
        return view.text
    images = [ToolOutputImage(image_url=f"data:{i.mime};base64,{base64.b64encode(i.data).decode('ascii')}")
              for i in view.images]
    return [ToolOutputText(text=view.text), *images]
