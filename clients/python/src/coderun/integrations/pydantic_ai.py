"""pydantic-ai: a toolset whose one tool runs the model's Python, with the host's tools bound.

>>> agent = Agent(model, toolsets=[code_mode([get_weather, get_forecast])])

:func:`code_mode` wraps a toolset (a ``FunctionToolset``, or any toolset) or plain functions. The
model sees one tool, ``run_python``, described by the stubs of the wrapped tools (their
pydantic-ai schemas); a program's ``await tools.get_weather(city="Paris")`` validates its
arguments as pydantic-ai would and calls the tool with the run's context. The text the model
reads is :func:`coderun.model_text`'s; displayed images come back as ``BinaryContent``.

The daemon starts on first use; the session (one per agent run, or per ``async with agent:``
block, which enters the toolset once) and the daemon close when the agent leaves the toolset.
Cancelling the agent's run cancels the program.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from pydantic_ai import BinaryContent
from pydantic_ai._run_context import RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset
from pydantic_core import SchemaValidator, core_schema, to_jsonable_python

from ..types import Limits
from ._core import PROGRAM_SCHEMA, CodeMode, DaemonFactory, HostTool

__all__ = ["code_mode", "CodeModeToolset"]

_PROGRAM = SchemaValidator(core_schema.typed_dict_schema(
    {"program": core_schema.typed_dict_field(core_schema.str_schema())}, extra_behavior="forbid"))


@dataclass
class CodeModeToolset(WrapperToolset[Any]):
    """The wrapped toolset's tools behind one code tool (see the module documentation)."""

    code: CodeMode = field(default_factory=CodeMode)
    tool_name: str = "run_python"
    max_retries: int = 1

    async def __aenter__(self) -> "CodeModeToolset":
        await super().__aenter__()
        await self.code.__aenter__()
        return self

    async def __aexit__(self, *args: Any) -> Optional[bool]:
        try:
            await self.code.__aexit__(*args)
        finally:
            await super().__aexit__(*args)
        return None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        description = await self.code.describe(await self._host_tools(ctx))
        tool_def = ToolDefinition(name=self.tool_name, description=description,
                                  parameters_json_schema=dict(PROGRAM_SCHEMA))
        return {self.tool_name: ToolsetTool(toolset=self, tool_def=tool_def, max_retries=self.max_retries,
                                            args_validator=_PROGRAM)}

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]) -> Any:
        view = await self.code.run(tool_args["program"], await self._host_tools(ctx))
        if not view.images:
            return view.text
        return [view.text, *(BinaryContent(img.data, media_type=img.mime) for img in view.images)]

    async def _host_tools(self, ctx: RunContext[Any]) -> list[HostTool]:
        tools = await self.wrapped.get_tools(ctx)
        return [_host_tool(self.wrapped, name, tool, ctx) for name, tool in tools.items()]


def _host_tool(toolset: AbstractToolset[Any], name: str, tool: ToolsetTool[Any], ctx: RunContext[Any]) -> HostTool:
    """``tool`` as the program calls it: arguments validated as pydantic-ai validates a model's,
    the result made JSON as pydantic-ai serialises a tool's return for the model."""

    async def call(arguments: dict[str, Any]) -> Any:
        validated = tool.args_validator.validate_python(arguments)
        return to_jsonable_python(await toolset.call_tool(name, validated, ctx, tool))

    return HostTool(name, tool.tool_def.description, tool.tool_def.parameters_json_schema, call)


def code_mode(
    tools: Union[AbstractToolset[Any], Sequence[Callable[..., Any]]],
    *,
    session: bool = True,
    limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
    namespace: str = "tools",
    tool_name: str = "run_python",
    daemon: Optional[DaemonFactory] = None,
) -> CodeModeToolset:
    """One toolset with one code tool over ``tools`` (a toolset, or functions for a
    ``FunctionToolset``). ``session=False``: a fresh interpreter per call; ``limits``: every run's
    budgets (also in the stubs' header); ``daemon``: how to start it (default ``Client.start``)."""
    wrapped = tools if isinstance(tools, AbstractToolset) else FunctionToolset(list(tools))
    code = CodeMode(namespace=namespace, session=session, limits=limits, daemon=daemon)
    return CodeModeToolset(wrapped=wrapped, code=code, tool_name=tool_name)
