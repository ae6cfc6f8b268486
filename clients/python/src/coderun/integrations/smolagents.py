"""smolagents: a ``PythonExecutor`` so that ``CodeAgent`` runs its code in coderun.

>>> agent = CodeAgent(tools=[get_weather], model=model, executor=CoderunExecutor())

The agent's code runs in the daemon's child (a real CPython under budgets, any import the
interpreter has) instead of smolagents' local interpreter. Its tools are bindings: the code calls
them as smolagents' prompt shows, as plain functions (``get_weather(city="Paris")``), and
``final_answer(x)`` ends the step with ``x``. The code runs in a worker thread of the child whose
tool calls go to the run's event loop, so the calls may sit anywhere (in loops, in functions).
The daemon checks each call against the tool's ``inputs`` (smolagents names are identifiers).
``send_variables`` values that are JSON become globals.

By default the agent's steps share one session (variables stay from one step to the next, as
with the local executor); ``session=False`` gives every step a fresh interpreter. The daemon
starts on the first step and closes with ``agent.cleanup()`` (``with agent:``). Ctrl-C during a
step (``KeyboardInterrupt``) stops the program before it propagates. The step's text output is
the last expression's value (or the final answer) and its logs.

A step's displayed images (matplotlib figures among them) are in :attr:`CoderunExecutor.images`.
smolagents shows a model images through a step's ``observations_images``, which only a step
callback can set (an executor never sees the step): pass the executor's
:meth:`~CoderunExecutor.step_callback`, as in
``CodeAgent(..., executor=ex, step_callbacks=[ex.step_callback])``, and the model reads each
step's images with its observation at the next step.
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any, Mapping, Optional, Union

from PIL import Image as PILImage

from smolagents.local_python_executor import CodeOutput, PythonExecutor  # type: ignore[import-untyped]
from smolagents.memory import ActionStep  # type: ignore[import-untyped]
from smolagents.tools import Tool  # type: ignore[import-untyped]

from .. import _json
from ..modeltext import Image, model_text
from ..types import Limits
from ._core import CodeMode, DaemonFactory, HostTool

__all__ = ["CoderunExecutor", "CodeExecutionError"]

_JSON_TYPES = {"string", "boolean", "integer", "number", "array", "object", "null"}

_HELPERS = """
import asyncio as _coderun_asyncio, ast as _coderun_ast, concurrent.futures as _coderun_futures
_coderun_pool = _coderun_futures.ThreadPoolExecutor(1, thread_name_prefix="coderun-step")
class _CoderunFinal(BaseException):
    pass
def _coderun_final_answer(answer):
    raise _CoderunFinal(answer)
def _coderun_sync(name, loop):
    async def call(args, kwargs):
        return await _coderun_tools[name](*args, **kwargs)
    def tool(*args, **kwargs):
        return _coderun_asyncio.run_coroutine_threadsafe(call(args, kwargs), loop).result()
    tool.__name__ = name
    return tool
def _coderun_step(code):
    tree = _coderun_ast.parse(code, "<code>")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], _coderun_ast.Expr) else None
    exec(compile(tree, "<code>", "exec"), globals())
    return None if last is None else eval(compile(_coderun_ast.Expression(last.value), "<code>", "eval"), globals())
def _coderun_failure(e):
    tb, line = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<code>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f"{type(e).__name__}: {e}" + ("" if line is None else f" (line {line})")
async def _coderun_run(names, variables, code):
    loop = _coderun_asyncio.get_running_loop()
    globals().update(variables)
    globals().update({name: _coderun_sync(name, loop) for name in names})
    globals()["final_answer"] = _coderun_final_answer
    try:
        return {"final": False, "value": await loop.run_in_executor(_coderun_pool, _coderun_step, code)}
    except _CoderunFinal as e:
        return {"final": True, "value": e.args[0]}
    except SyntaxError as e:
        return {"failure": f"SyntaxError: {e.msg} (line {e.lineno})"}
    except Exception as e:
        return {"failure": _coderun_failure(e)}
"""
"""The step's helpers, defined once per interpreter: the tools as plain functions,
``final_answer``, and the agent's code run in one worker thread kept for the session (a new
thread per step costs milliseconds in the child)."""

_STEP = """\
if "_coderun_run" not in globals():
    exec({helpers}, globals())
return await _coderun_run({names}, {variables}, {code})
"""
"""The program of one step: the helpers when the interpreter lacks them (a literal parses at
once), then the step; its value says how the step ended."""


class CodeExecutionError(RuntimeError):
    """The agent's code failed (CodeAgent shows the message to the model and goes on)."""


class CoderunExecutor(PythonExecutor):  # type: ignore[misc]  # smolagents is untyped
    """A smolagents ``PythonExecutor`` that runs the agent's code in coderun (see the module
    documentation). ``limits``: every step's budgets; ``session``: one session for the agent's
    steps (default) or a fresh interpreter per step; ``daemon``: how to start it."""

    def __init__(
        self,
        *,
        session: bool = True,
        limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
        daemon: Optional[DaemonFactory] = None,
    ) -> None:
        # the tools' global is the step's own: the agent's code calls the tools by their names
        self.code = CodeMode(namespace="_coderun_tools", session=session, limits=limits, daemon=daemon)
        self._tools: list[HostTool] = []
        self._variables: dict[str, Any] = {}
        self.images: list[Image] = []
        """The images the last step displayed, in order."""
        self._unshown: list[Image] = []  # the last step's images until step_callback takes them

    def send_tools(self, tools: dict[str, Tool]) -> None:
        """Bind ``tools`` (``final_answer`` is the step's own) for the next steps."""
        self._tools = [_host_tool(name, t) for name, t in tools.items() if name != "final_answer"]

    def send_variables(self, variables: dict[str, Any]) -> None:
        """Make the JSON values of ``variables`` globals of the next steps (others are skipped:
        they cannot reach another process; so are ``final_answer`` and names starting
        ``_coderun``, which the step needs)."""
        for name, value in variables.items():
            if isinstance(name, str) and name.isidentifier() and not _reserved(name) and _is_json(value):
                self._variables[name] = value

    def __call__(self, code_action: str) -> CodeOutput:
        """Run one step; raises :class:`CodeExecutionError` when the code fails."""
        names = [t.name for t in self._tools if t.name.isidentifier()]
        program = _STEP.format(helpers=repr(_HELPERS), names=repr(names),
                               variables=f"__import__('json').loads({json.dumps(self._variables)!r})",
                               code=repr(code_action))
        result = self.code.execute_sync(program, self._tools)
        view = model_text(result)
        self.images = self._unshown = view.images
        logs = "".join(result.logs)
        if result.error is not None:
            raise CodeExecutionError(view.text)
        outcome = result.value if isinstance(result.value, dict) else {}
        if "failure" in outcome:
            raise CodeExecutionError(f"{logs}{outcome['failure']}")
        return CodeOutput(output=outcome.get("value"), logs=logs, is_final_answer=outcome.get("final") is True)

    def step_callback(self, memory_step: Any, agent: Any = None) -> None:
        """A smolagents step callback: the images the step's code displayed become the step's
        ``observations_images`` (each at most once: a step that ran no code gets none). An
        image PIL fails on is left out, and so is one past _MAX_STEP_PIXELS in all."""
        images, self._unshown = self._unshown, []
        if isinstance(memory_step, ActionStep) and images:
            memory_step.observations_images = _pil_images(images) or None

    def cleanup(self) -> None:
        """Close the session and the daemon (``agent.cleanup()`` calls it)."""
        self.code.close()


_MAX_STEP_PIXELS = 1 << 26
"""The pixels of the images one step attaches, in all: PIL decodes each at up to four bytes a
pixel, and an outputs budget holds dozens of compressed canvases of the daemon's bound on one
image (also 2^26 pixels)."""


def _pil_images(images: list[Image]) -> list[PILImage.Image]:
    """``images`` decoded by PIL, in order, leaving out those PIL fails on (whatever its error)
    and those that would take the step past _MAX_STEP_PIXELS (the size is read from the header
    first)."""
    decoded: list[PILImage.Image] = []
    left = _MAX_STEP_PIXELS
    for image in images:
        try:
            im = PILImage.open(io.BytesIO(image.data))
            pixels = im.size[0] * im.size[1]
            if pixels > left:
                continue
            im.load()
        except Exception:  # PIL's plugins fail on hostile bytes with many types (SyntaxError among them)
            continue
        left -= pixels
        decoded.append(im)
    return decoded


def _host_tool(name: str, tool: Tool) -> HostTool:
    """A smolagents tool as the program calls it: its ``inputs`` as the schema, called in a
    thread (tools are synchronous)."""

    async def call(arguments: dict[str, Any]) -> Any:
        return await asyncio.to_thread(tool, **arguments)

    return HostTool(name, getattr(tool, "description", None), _schema(getattr(tool, "inputs", {})), call)


def _schema(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """smolagents ``inputs`` as a JSON Schema: JSON types kept, others (image, audio, any)
    unconstrained; ``nullable`` inputs optional and allowing null."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for arg, spec in inputs.items():
        spec = spec if isinstance(spec, Mapping) else {}
        declared = spec.get("type")
        types = [t for t in (declared if isinstance(declared, list) else [declared]) if t in _JSON_TYPES]
        nullable = spec.get("nullable") is True
        if nullable and types and "null" not in types:
            types.append("null")
        prop: dict[str, Any] = {}
        if types and len(types) == len(declared if isinstance(declared, list) else [declared]):
            prop["type"] = types[0] if len(types) == 1 else types
        if isinstance(spec.get("description"), str):
            prop["description"] = spec["description"]
        properties[arg] = prop
        if not nullable:
            required.append(arg)
    return {"type": "object", "properties": properties, "required": required}


def _reserved(name: str) -> bool:
    """Names a variable may not take: the step's own."""
    return name == "final_answer" or name.startswith("_coderun")


def _is_json(value: Any) -> bool:
    try:
        _json.encode(value)
    except (ValueError, TypeError):
        return False
    return True
