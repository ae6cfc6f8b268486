"""LangChain: LangChain tools in, one tool out that runs the model's Python with them bound.

>>> run_python = code_tool([get_weather, get_forecast])
>>> model.bind_tools([run_python])

:func:`code_tool` takes ``BaseTool``s (``StructuredTool``, ``@tool`` functions) and returns one
``StructuredTool``, ``run_python``, whose description holds the stubs of those tools (from their
LangChain tool-call schemas, injected arguments left out). A program's
``await tools.get_weather(city="Paris")`` runs the tool as LangChain does (``ainvoke``, its own
argument parsing). The tool message's content is :func:`coderun.model_text`'s text, then the
displayed images as standard ``image`` blocks.

The description needs the stubs, so the daemon starts when the tool is made; the session (one per
tool, kept across the model's turns) and the daemon close with :func:`close_code_tool`, or when
the tool is garbage collected. ``ainvoke`` cancelled cancels the program; so does
``KeyboardInterrupt`` during ``invoke``.
"""

# No ``from __future__ import annotations`` here: LangChain reads the type hints of the tool's
# functions on every call (looking for a RunnableConfig parameter), and string annotations cost
# it a compile per call, a tenth of a millisecond of each code tool call.

import base64
from typing import Any, Mapping, Optional, Sequence, Union

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from ..modeltext import ModelText
from ..types import Limits
from ._core import CodeMode, DaemonFactory, HostTool, ToolModes

__all__ = ["code_tool", "close_code_tool"]

class _Program(BaseModel):
    """The code tool's arguments: LangChain validates them (a bad call is the model's to fix)."""

    program: str = Field(description="the Python program")


_MODES = ToolModes()
"""The CodeMode of each live tool made by code_tool."""


def code_tool(
    tools: Sequence[BaseTool],
    *,
    session: bool = True,
    limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
    namespace: str = "tools",
    name: str = "run_python",
    daemon: Optional[DaemonFactory] = None,
) -> StructuredTool:
    """One ``StructuredTool`` over ``tools`` (see the module documentation). ``session=False``:
    a fresh interpreter per call; ``limits``: every run's budgets (also in the stubs' header);
    ``daemon``: how to start it (default ``Client.start``)."""
    host = [_host_tool(t) for t in tools]
    code = CodeMode(namespace=namespace, session=session, limits=limits, daemon=daemon)

    def run(program: str) -> Any:
        return _content(code.run_sync(program, host))

    async def arun(program: str) -> Any:
        return _content(await code.run(program, host))

    description = _MODES.describe(code, host)
    tool = StructuredTool(name=name, description=description, args_schema=_Program, func=run, coroutine=arun,
                          handle_validation_error=f'{name}: arguments must be {{"program": "<python>"}}')
    _MODES.adopt(tool, code)
    return tool


def close_code_tool(tool: BaseTool) -> None:
    """Close the session and the daemon of a tool made by :func:`code_tool` (idempotent; the
    next call starts them again)."""
    _MODES.close(tool)



def _host_tool(tool: BaseTool) -> HostTool:
    """``tool`` as the program calls it: its tool-call schema and ``ainvoke``."""
    if not isinstance(tool, BaseTool):
        raise TypeError(f"code_tool takes LangChain tools (BaseTool), not {type(tool).__name__}")
    parameters = convert_to_openai_tool(tool)["function"].get("parameters") or {"type": "object"}

    async def call(arguments: dict[str, Any]) -> Any:
        return to_jsonable_python(await tool.ainvoke(arguments))

    return HostTool(tool.name, tool.description, parameters, call)


def _content(view: ModelText) -> Union[str, list[dict[str, str]]]:
    """The tool message content: the text, then the images as standard image blocks."""
    if not view.images:
        return view.text
    images = [{"type": "image", "base64": base64.b64encode(i.data).decode("ascii"), "mime_type": i.mime}
              for i in view.images]
    return [{"type": "text", "text": view.text}, *images]
