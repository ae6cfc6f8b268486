"""The engine every framework adapter shares: one code tool over the host's own tools.

:class:`CodeMode` owns a daemon, started on first use on a private event loop in a thread of its
own (so that a conversation's session outlives the event loops of synchronous frameworks, which
make one per call), and closed by :meth:`CodeMode.close`. A run's host tool calls go back to the
event loop that asked for the run, where the framework's tools expect to run.

By default the runs of one :class:`CodeMode` share one session (the globals, imports and files of
one model turn are there for the next); ``session=False`` gives every run a fresh interpreter.
The stubs the model reads (:meth:`CodeMode.describe`) and the runs use the same limits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import keyword
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Generic, Mapping, Optional, Sequence, TypeVar

from .. import _json
from ..client import Client, describe_without_daemon
from ..modeltext import ModelText, model_text
from ..session import Session
from ..typed import Binding
from ..types import Limits, RunResult

__all__ = ["HostTool", "CodeMode", "DaemonFactory", "PROGRAM_SCHEMA"]

T = TypeVar("T")

DaemonFactory = Callable[[], Awaitable[Client]]
"""Starts (or connects to) the daemon a :class:`CodeMode` uses; called on its private loop."""

PROGRAM_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"program": {"type": "string", "description": "the Python program"}},
    "required": ["program"],
    "additionalProperties": False,
}
"""The code tool's parameters: one Python program."""

_INTRO = """Run a Python program in a fresh CPython process under budgets and return its logs and value.
A top-level return gives the run's value; print() output is logged; displayed images and \
matplotlib figures are shown to you.
The host's tools are async functions of the global `{ns}`: call them with await, for example \
`r = await {ns}.name(arg=1)`; a tool whose name is not an identifier is reached by subscript: \
`await {ns}["my-tool"](arg=1)`. A failing tool raises an exception with its message.
{state}
The API:

"""
_STATEFUL = "Runs share one interpreter: variables, imports and files stay for the next run."
_STATELESS = "Every run starts a fresh interpreter: nothing stays from one run to the next."


@dataclass(frozen=True)
class HostTool:
    """One host tool as the program sees it: ``tools.<name>(**arguments)``.

    ``parameters`` is the framework's own JSON Schema of the arguments (an object schema; the
    daemon checks every call against it before the host sees it); ``call`` receives the
    arguments as one mapping and returns a JSON value (or raises: the program gets the
    message)."""

    name: str
    description: Optional[str]
    parameters: Mapping[str, Any]
    call: Callable[[dict[str, Any]], Awaitable[Any]]


class CodeMode:
    """One code tool: describes the host tools to the model and runs its programs.

    ``namespace``: the global the tools are reached through (an identifier). ``session``: one
    session for every run (default) or a fresh interpreter per run. ``limits``: the budgets of
    every run, also stated in the stubs' header. ``daemon``: how the daemon is started (default
    :meth:`Client.start`, which finds the binary as documented there). With the default, the
    daemon starts at the first run: a description before it comes from ``coderun-rpc describe``.
    """

    def __init__(
        self,
        *,
        namespace: str = "tools",
        session: bool = True,
        limits: Optional[Limits | Mapping[str, Any]] = None,
        daemon: Optional[DaemonFactory] = None,
    ) -> None:
        if not namespace.isidentifier() or keyword.iskeyword(namespace) or not namespace.isascii():
            raise ValueError(f"namespace must be an ASCII Python identifier, not {namespace!r}")
        if limits is not None and not isinstance(limits, Mapping):
            raise TypeError("limits must be a mapping such as {'maxWallMs': 5000}")
        self.namespace = namespace
        self.stateful = session
        self.limits: dict[str, Any] = dict(limits or {})
        self._start_daemon: DaemonFactory = daemon or Client.start
        self._default_daemon = daemon is None
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._client: Optional[Client] = None
        self._session: Optional[Session] = None
        self._opening: Optional[asyncio.Lock] = None  # on the private loop: one daemon
        self._turns: Optional[asyncio.Lock] = None  # on the private loop: the session's runs in turn
        self._stubs: Optional[tuple[bytes, str]] = None  # the last declarations described
        self._users = 0  # open ``async with`` blocks: the last to leave closes

    # ------------------------------------------------------------------ what the model reads

    async def describe(self, tools: Sequence[HostTool]) -> str:
        """The code tool's description: how to use it, then the stubs of ``tools`` with the
        budgets of the runs in their header. Raises what ``Client.describe`` raises (an
        ``InvalidParams`` naming the tool whose schema the daemon refuses)."""
        return await self._bridge(self._describe(tools))

    def describe_sync(self, tools: Sequence[HostTool]) -> str:
        """:meth:`describe` for a caller without a running event loop."""
        return self._wait(self._describe(tools))

    async def _describe(self, tools: Sequence[HostTool]) -> str:
        bindings = self._bindings(tools, None)
        key = _json.encode([[b.declaration(n) for n, b in bindings[self.namespace].items()], self.limits])
        if self._stubs is None or self._stubs[0] != key:  # frameworks list the tools every step
            self._stubs = (key, await self._render(bindings))
        stubs = self._stubs[1]
        state = _STATEFUL if self.stateful else _STATELESS
        return _INTRO.format(ns=self.namespace, state=state) + stubs

    async def _render(self, bindings: dict[str, dict[str, Binding]]) -> str:
        """The stubs of ``bindings``: from the daemon when it runs; before it is started, when it
        is the default one, from ``coderun-rpc describe`` (the same binary and environment, so
        the same text), so that making a tool starts no daemon: the first run does."""
        if self._default_daemon and (self._client is None or self._client.closed):
            return await describe_without_daemon(bindings=bindings, limits=self.limits)
        client = await self._daemon()
        return await client.describe(bindings=bindings, limits=self.limits)

    # ------------------------------------------------------------------ running

    async def run(self, program: str, tools: Sequence[HostTool]) -> ModelText:
        """Run ``program`` with ``tools`` bound; their calls run on the caller's event loop.
        Cancelling the caller cancels the run and returns once the daemon has stopped it."""
        return await self._bridge(self._run(program, tools, asyncio.get_running_loop()))

    def run_sync(self, program: str, tools: Sequence[HostTool]) -> ModelText:
        """:meth:`run` for a caller without a running event loop: tool calls run on the private
        loop (a tool's own blocking work belongs in a thread, as ``HostTool.call`` arranges).
        An exception while it waits (``KeyboardInterrupt``) cancels the run first."""
        return self._wait(self._run(program, tools, None))

    def execute_sync(self, program: str, tools: Sequence[HostTool]) -> RunResult:
        """:meth:`run_sync`'s run result itself, for an adapter that reads it (smolagents)."""
        return self._wait(self._execute(program, tools, None))

    async def _run(self, program: str, tools: Sequence[HostTool], caller: Optional[asyncio.AbstractEventLoop]) -> ModelText:
        result = await self._execute(program, tools, caller)
        view = model_text(result)
        if result.session is not None and not result.session.alive:
            why = f" ({result.session.reason})" if result.session.reason else ""
            note = f"\nthe session ended{why}: its variables are gone; the next run starts a fresh interpreter"
            view = ModelText(view.text + note, True, view.images)
        return view

    async def _execute(self, program: str, tools: Sequence[HostTool], caller: Optional[asyncio.AbstractEventLoop]) -> RunResult:
        if not isinstance(program, str):
            raise TypeError(f"program must be a str, not {type(program).__name__}")
        bindings = self._bindings(tools, caller)
        client = await self._daemon()
        if not self.stateful:
            return await client.run(program, bindings=bindings, limits=self.limits)
        # One run at a time: the session runs them in turn anyway, and a run that follows a
        # cancelled one must see that the cancel took the session with it.
        if self._turns is None:
            self._turns = asyncio.Lock()
        async with self._turns:
            session = await self._open_session(client)
            per_run = {k: v for k, v in self.limits.items() if k != "addressSpaceMb"}  # fixed at open
            try:
                result = await session.run(program, bindings=bindings, limits=per_run)
            except asyncio.CancelledError:
                self._session = None  # a cancelled run ends its session: the next opens one
                raise
            if result.session is not None and not result.session.alive:
                self._session = None
            return result

    async def _open_session(self, client: Client) -> Session:
        """The conversation's session, opened when there is none (called in turn: see _execute)."""
        if self._session is None or self._session.state != "open":
            self._session = await client.open_session(limits=self.limits)
        return self._session

    def _bindings(self, tools: Sequence[HostTool], caller: Optional[asyncio.AbstractEventLoop]) -> dict[str, dict[str, Binding]]:
        """The run's one namespace: each tool a typed binding whose calls reach ``tool.call`` on
        ``caller`` (on the private loop without one). Raises ValueError for a repeated name."""
        functions: dict[str, Binding] = {}
        for tool in tools:
            if not isinstance(tool.name, str) or not tool.name:
                raise ValueError(f"a tool name must be a non-empty str, not {tool.name!r}")
            if tool.name in functions:
                raise ValueError(f"two tools are named {tool.name!r}")
            # by name without a signature: the call's arguments object arrives as one mapping
            functions[tool.name] = Binding(
                _on_loop(tool.call, caller),
                description=tool.description or None,
                parameters=_object_schema(tool),
                by_name=True,
            )
        return {self.namespace: functions}

    # ------------------------------------------------------------------ the daemon's life

    async def _daemon(self) -> Client:
        """The client, started on first use (on the private loop: only it touches the client)."""
        async with self._one_at_a_time():
            if self._client is None or self._client.closed:
                self._client = await self._start_daemon()
                self._session = None
            return self._client

    def _one_at_a_time(self) -> asyncio.Lock:
        if self._opening is None:
            self._opening = asyncio.Lock()
        return self._opening

    async def __aenter__(self) -> "CodeMode":
        self._users += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Leaving the last open ``async with`` block closes the session and the daemon."""
        self._users -= 1
        if self._users == 0:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the session and the daemon and stop the private loop; the next use starts them
        again. Idempotent."""
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def close(self) -> None:
        """:meth:`aclose` for a caller without a running event loop."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        if threading.current_thread() is thread:
            # on the private loop itself (a finalizer its garbage collection ran): it cannot
            # wait for itself, so the loop shuts the client down and then stops
            loop.create_task(self._shutdown()).add_done_callback(lambda _: loop.stop())
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    async def _shutdown(self) -> None:
        client, self._client, self._session = self._client, None, None
        self._opening = self._turns = None
        self._stubs = None
        if client is not None:
            await client.close()

    def _private_loop(self) -> asyncio.AbstractEventLoop:
        """The loop the client lives on, started in its thread on first use."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="coderun-code-mode", daemon=True)
                self._thread.start()
            return self._loop

    def _start(self, coro: Coroutine[Any, Any, T]) -> "_Started[T]":
        """Start ``coro`` as a task on the private loop."""
        loop = self._private_loop()
        started = _Started[T](loop)
        loop.call_soon_threadsafe(started.begin, coro)
        return started

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the private loop and block until it ends; an exception while waiting
        (``KeyboardInterrupt``) cancels it and waits until it has ended (a run's child is then
        stopped) before it propagates."""
        started = self._start(coro)
        try:
            task = _result(started.ended)
        except BaseException:
            started.cancel()
            while True:
                try:
                    _result(started.ended)
                    break
                except BaseException:  # noqa: BLE001 - interrupted again: still wait for the end
                    continue
            raise
        return task.result()

    async def _bridge(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the private loop from the caller's; cancelling the caller cancels
        it there and waits until it has ended (a run's child is then stopped)."""
        started = self._start(coro)
        ended = asyncio.wrap_future(started.ended)
        try:
            task = await asyncio.shield(ended)
        except asyncio.CancelledError:
            started.cancel()
            await _uninterrupted(ended)
            raise
        return task.result()


class _Started(Generic[T]):
    """A task on the private loop, seen from another thread: ``ended`` is done (with the task)
    once the task has ended, however it ended, even when it was cancelled before its first step
    (whose body then never runs)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._task: Optional["asyncio.Task[T]"] = None
        self.ended: "concurrent.futures.Future[asyncio.Task[T]]" = concurrent.futures.Future()

    def begin(self, coro: Coroutine[Any, Any, T]) -> None:
        self._task = self._loop.create_task(coro)
        self._task.add_done_callback(self.ended.set_result)

    def cancel(self) -> None:
        # scheduled after begin on the same loop, so the task exists when this runs
        self._loop.call_soon_threadsafe(lambda: self._task is not None and self._task.cancel())


_SIGNAL_CHECK = 0.05
"""How often a blocked wait looks for a signal: Ctrl-C may be delivered to another thread (the
private loop's), and the main thread runs its handler only when it next runs Python code."""


def _result(future: "concurrent.futures.Future[T]") -> T:
    """``future.result()``, waking every _SIGNAL_CHECK seconds so that a KeyboardInterrupt
    reaches the waiting thread whichever thread took the signal."""
    while True:
        try:
            return future.result(timeout=_SIGNAL_CHECK)
        except concurrent.futures.TimeoutError:
            continue


def _object_schema(tool: HostTool) -> dict[str, Any]:
    """``tool.parameters`` as the object schema the daemon requires: a schema that names no
    type (as some frameworks give for a tool without arguments) is an object schema."""
    if not isinstance(tool.parameters, Mapping):
        raise ValueError(f"tool {tool.name!r}: parameters must be a JSON Schema object, not {type(tool.parameters).__name__}")
    schema = dict(tool.parameters)
    schema.setdefault("type", "object")
    return schema


def _on_loop(call: Callable[[dict[str, Any]], Awaitable[Any]], caller: Optional[asyncio.AbstractEventLoop]) -> Callable[..., Awaitable[Any]]:
    """A binding function that passes its arguments object to ``call`` on ``caller``."""

    async def tool(arguments: Any) -> Any:
        if not isinstance(arguments, dict):  # the daemon checked the schema; a schema may say anything
            raise TypeError(f"arguments must be an object, not {type(arguments).__name__}")
        if caller is None:
            return await call(arguments)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_awaited(call(arguments)), caller))

    return tool


async def _awaited(aw: Awaitable[T]) -> T:
    return await aw


async def _uninterrupted(fut: "asyncio.Future[Any]") -> None:
    """Wait for ``fut`` even when cancelled again meanwhile (the cancel is kept for after)."""
    cancelled = False
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


class ToolModes:
    """The :class:`CodeMode` behind each tool an adapter made, by the tool's identity: the
    tool's daemon is closed by :meth:`close`, or when the tool itself is collected."""

    def __init__(self) -> None:
        self._modes: dict[int, CodeMode] = {}

    def describe(self, code: CodeMode, hosts: Sequence[HostTool]) -> str:
        """The tool's description (the stubs of ``hosts``); ``code`` is closed when it fails."""
        try:
            return code.describe_sync(hosts)
        except BaseException:
            code.close()
            raise

    def adopt(self, tool: object, code: CodeMode) -> None:
        """Keep ``code`` as ``tool``'s until :meth:`close` or the tool's collection."""
        self._modes[id(tool)] = code
        weakref.finalize(tool, self._forget, id(tool))

    def of(self, tool: object) -> CodeMode:
        """The CodeMode of ``tool`` (KeyError for a tool this registry did not make)."""
        return self._modes[id(tool)]

    def close(self, tool: object) -> None:
        """Close the session and the daemon of ``tool`` (idempotent; the next call starts them
        again)."""
        code = self._modes.get(id(tool))
        if code is not None:
            code.close()

    def _forget(self, key: int) -> None:
        """The tool is gone: close its CodeMode."""
        code = self._modes.pop(key, None)
        if code is not None:
            code.close()
