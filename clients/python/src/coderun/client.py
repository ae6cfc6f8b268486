"""The asyncio transport: start (or attach to) a coderun-rpc daemon and run programs.

Everything protocol-shaped is in the I/O-free modules (``_framing``, ``_json``, ``protocol``);
this module only moves bytes, keeps the tables of pending requests, runs and binding tasks, and
fails every pending call at once when the daemon goes away.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import logging
from typing import Any, Awaitable, Callable, Mapping, Optional, Protocol, Sequence, TypedDict, Union

from . import _json
from . import protocol as P
from ._framing import FrameParser, FramingError, frame_header
from ._ws import open_websocket
from ._locate import find_daemon, merged_env
from ._mcpconfig import McpConfig, mcp_config_file
from .errors import (
    ClientClosed,
    CodeRunError,
    ConnectionLost,
    InvalidParams,
    ProtocolViolation,
    SessionNotOpen,
    error_from_response,
)
from ._outputs import Files, OutputEvent, build_files, parse_output
from .session import Session, SessionClosedCallback, SessionOpener, fire, subscribe
from .typed import Binding, resolve
from .types import EgressRule, Limits, LogEvent, RunResult, Secret, SessionClosed, parse_run_result

__all__ = [
    "Client", "RunHandle", "BindingFunction", "LogCallback", "OutputCallback", "Session",
    "Bindings", "McpBinding", "FunctionsBinding",
]

log = logging.getLogger("coderun")

BindingFunction = Callable[..., Any]
"""A host function (or a :class:`~coderun.typed.Binding`): typed, it is called with its arguments by
name; with one unannotated parameter, with the call's one JSON value (see :mod:`coderun.typed`).
It returns a JSON value (or an awaitable)."""

LogCallback = Callable[[LogEvent], Any]
"""Called for every ``run/log`` notification, in order; may return an awaitable."""

OutputCallback = Callable[[OutputEvent], Any]
"""Called for every ``run/output`` notification, in order with ``on_log``; may return an awaitable."""

McpBinding = TypedDict("McpBinding", {"global": str, "mcp": str})
McpBinding.__doc__ = """``{"global": "gh", "mcp": "github"}``: the global ``gh`` is the upstream MCP server the
daemon was started with under key ``github`` (``mcp_config``); its tools are the global's functions,
called by the daemon and never by this client (docs/mcp.md §3)."""

FunctionsBinding = TypedDict("FunctionsBinding", {"global": str, "functions": Mapping[str, BindingFunction]})
FunctionsBinding.__doc__ = """``{"global": "tools", "functions": {name: callable}}``: the list form of one
namespace of the mapping form."""

Bindings = Union[Mapping[str, Mapping[str, BindingFunction]], Sequence[Union[McpBinding, FunctionsBinding]]]
"""Either ``{namespace: {function name: callable}}``, or a list of :class:`FunctionsBinding` and
:class:`McpBinding` declarations (the TypeScript client's shape), in the order the program's globals
are declared."""

_Table = dict[str, Union[dict[str, Binding], str]]
"""Checked bindings: namespace → its functions resolved, or the key of its MCP server."""
ErrorClasses = Mapping[str, Sequence[str]]


class StreamReaderLike(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class StreamWriterLike(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


def _check_run_args(
    program: object,
    bindings: Optional[Bindings],
    error_classes: Optional[ErrorClasses],
    limits: object,
    on_log: object,
) -> tuple[_Table, dict[str, tuple[str, str]]]:
    """Validate the API arguments (TypeError / ValueError); return normalised copies, each
    binding resolved to its declaration."""
    if not isinstance(program, str):
        raise TypeError(f"program must be a str, not {type(program).__name__}")
    if on_log is not None and not callable(on_log):
        raise TypeError("on_log must be callable")
    return _check_declarations(bindings, error_classes, limits)


def _check_declarations(
    bindings: Optional[Bindings], error_classes: Optional[ErrorClasses], limits: object
) -> tuple[_Table, dict[str, tuple[str, str]]]:
    """The checks of :func:`_check_run_args` that ``describe`` shares with ``run``."""
    table = _check_bindings(bindings)
    classes: dict[str, tuple[str, str]] = {}
    if error_classes is not None and not isinstance(error_classes, Mapping):
        raise TypeError("error_classes must be a mapping {namespace: (class name, member name property)}")
    for ns, spec in (error_classes or {}).items():
        if ns not in table:
            raise ValueError(f"error_classes names namespace {ns!r}, which is not in bindings")
        if isinstance(spec, str) or not isinstance(spec, Sequence) or len(spec) != 2:
            raise TypeError(f"error_classes[{ns!r}] must be a pair (class name, member name property)")
        name, prop = spec
        if not isinstance(name, str) or not isinstance(prop, str):
            raise TypeError(f"error_classes[{ns!r}] must hold two str")
        classes[ns] = (name, prop)
    if limits is not None and not isinstance(limits, Mapping):
        raise TypeError("limits must be a mapping such as {'maxWallMs': 5000}")
    return table, classes


def _namespaces(bindings: Optional[Bindings]) -> list[tuple[str, object, str]]:
    """``bindings`` in either form as (namespace, its functions or MCP binding, where it came from)."""
    if bindings is None:
        return []
    if isinstance(bindings, Mapping):
        return [(ns, fns, f"bindings[{ns!r}]") for ns, fns in bindings.items()]
    if isinstance(bindings, (str, bytes)) or not isinstance(bindings, Sequence):
        raise TypeError("bindings must be a mapping {namespace: {function name: callable}} or a list of "
                        "{'global': name, 'functions': {...}} / {'global': name, 'mcp': server key} declarations")
    out: list[tuple[str, object, str]] = []
    for i, decl in enumerate(bindings):
        where = f"bindings[{i}]"
        keys = set(decl) if isinstance(decl, Mapping) else set()
        if "global" not in keys or len(keys & {"functions", "mcp"}) != 1 or keys - {"global", "functions", "mcp"}:
            raise TypeError(f"{where} must be {{'global': name, 'functions': {{...}}}} or {{'global': name, 'mcp': server key}}")
        ns = decl["global"]
        if "mcp" in keys:
            key = decl["mcp"]  # type: ignore[typeddict-item]
            if not isinstance(key, str) or not key:
                raise TypeError(f"{where}['mcp'] must be the key of a configured MCP server (a non-empty str)")
            out.append((ns, key, where))
        else:
            out.append((ns, decl["functions"], f"{where}['functions']"))  # type: ignore[typeddict-item]
    return out


def _check_bindings(bindings: Optional[Bindings]) -> _Table:
    """The bindings table with every callable resolved (TypeError naming the bad entry)."""
    table: _Table = {}
    for ns, functions, where in _namespaces(bindings):
        if not isinstance(ns, str):
            raise TypeError(f"binding namespace must be a str, not {type(ns).__name__}")
        if ns in table:
            raise ValueError(f"bindings declare namespace {ns!r} twice")
        if isinstance(functions, str):
            table[ns] = functions
            continue
        if not isinstance(functions, Mapping):
            raise TypeError(f"{where} must be a mapping {{function name: callable}}")
        fns: dict[str, Binding] = {}
        table[ns] = fns
        for name, fn in functions.items():
            if not isinstance(name, str):
                raise TypeError(f"{where} has a function name that is not a str: {name!r}")
            if not callable(fn):
                raise TypeError(f"{where}[{name!r}] is not callable")
            try:
                fns[name] = resolve(fn)
            except TypeError as e:
                raise TypeError(f"{where}[{name!r}]: {e}") from None
    return table


def _declarations(table: _Table) -> dict[str, P.Declared]:
    """What each namespace declares on the wire: its functions, or its MCP server's key."""
    return {ns: fns if isinstance(fns, str) else [b.declaration(name) for name, b in fns.items()]
            for ns, fns in table.items()}


def _handlers(table: _Table) -> dict[str, dict[str, Binding]]:
    """The namespaces whose calls reach this client (an MCP binding's go to its server)."""
    return {ns: fns for ns, fns in table.items() if not isinstance(fns, str)}


class _RunState:
    __slots__ = ("id", "bindings", "on_log", "on_output", "future", "log_chain")

    def __init__(
        self,
        rid: int,
        bindings: dict[str, dict[str, Binding]],
        on_log: Optional[LogCallback],
        on_output: Optional[OutputCallback] = None,
    ) -> None:
        self.id = rid
        self.bindings = bindings
        self.on_log = on_log
        self.on_output = on_output
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.log_chain: Optional[asyncio.Future[None]] = None


class RunHandle:
    """A submitted run: :meth:`cancel` it, or ``await handle.result()`` (also ``await handle``).

    ``result()`` returns the run's :class:`RunResult` — for a cancelled run the ``abort``
    result — and raises :class:`RpcError` subclasses or :class:`ConnectionLost`.
    """

    def __init__(self, client: "Client", state: _RunState) -> None:
        self._client = client
        self._state = state
        self._cancel_sent = False

    @property
    def id(self) -> int:
        """The ``run`` request id (the ``runId`` of its binding calls and log events)."""
        return self._state.id

    def done(self) -> bool:
        return self._state.future.done()

    def cancel(self) -> bool:
        """Send ``$/cancelRequest`` for this run; the run then settles with kind ``abort``.

        Returns False when the run is already answered or the connection is gone."""
        if self.done() or self._client._lost is not None:
            return False
        if not self._cancel_sent:
            self._cancel_sent = True
            self._client._send_nowait(P.build_notification(P.METHOD_CANCEL, {"id": self.id}))
        return True

    async def result(self) -> RunResult:
        raw = await asyncio.shield(self._state.future)
        chain = self._state.log_chain
        if chain is not None:
            await asyncio.shield(chain)
        try:
            return parse_run_result(raw)
        except ValueError as e:
            raise ProtocolViolation(str(e)) from None

    def __await__(self) -> Any:
        return self.result().__await__()


class Client:
    """A connection to one coderun-rpc daemon.

    Use :meth:`start` (spawns the daemon) or :meth:`attach` (given streams), then
    :meth:`run`; :meth:`close` (or ``async with``) shuts the daemon down. A client is bound to
    the event loop it was created on.
    """

    def __init__(
        self,
        reader: StreamReaderLike,
        writer: StreamWriterLike,
        *,
        process: Optional[asyncio.subprocess.Process] = None,
        cancel_grace: float = 5.0,
        sync_bindings_in_thread: bool = True,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._process = process
        self._cancel_grace = cancel_grace
        self._sync_in_thread = sync_bindings_in_thread
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        self._runs: dict[Any, _RunState] = {}
        self._binding_tasks: dict[Any, asyncio.Task[None]] = {}
        self._drain_lock = asyncio.Lock()
        self._lost: Optional[ConnectionLost] = None
        self._refusal: Optional[str] = None  # the reason a daemon in service mode refused us
        self._closing = False
        self._closed = asyncio.Event()
        self._sessions: dict[str, Session] = {}
        self._session_listeners: list[SessionClosedCallback] = []
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self._reader_task = asyncio.ensure_future(self._read_loop())
        self._watch_task: Optional[asyncio.Task[None]] = None
        self._stderr_tail = b""
        self._stderr_task: Optional[asyncio.Task[None]] = None
        if process is not None:
            if process.stderr is not None:
                self._stderr_task = asyncio.ensure_future(self._keep_stderr_tail(process.stderr))
            self._watch_task = asyncio.ensure_future(self._watch_process(process))

    # ----------------------------------------------------------------------------- start / attach

    @classmethod
    async def start(
        cls,
        command: Union[str, Sequence[str], None] = None,
        env: Optional[Mapping[str, Optional[str]]] = None,
        *,
        cwd: Optional[str] = None,
        stderr: Any = "pipe",
        client_name: str = "coderun-python",
        initialize_timeout: float = 30.0,
        cancel_grace: float = 5.0,
        sync_bindings_in_thread: bool = True,
        mcp_config: McpConfig = None,
    ) -> "Client":
        """Spawn the daemon and initialize it.

        ``command``: the binary path (str) or a full argv (sequence); default
        ``CODERUN_RPC_BIN``, then the binary of a platform wheel, then ``coderun-rpc`` on PATH
        (see :func:`find_daemon`). ``env``: variables layered over
        ``os.environ`` (a value of ``None`` removes one). ``stderr``: where the daemon's log goes:
        ``"pipe"`` (default) keeps its last 8 KiB, whose last lines join the message of
        :class:`ConnectionLost` when the daemon exits (its start-up error, for one), ``"inherit"``
        passes it to this process's stderr, ``"ignore"`` drops it; a file object or descriptor
        receives it. ``mcp_config``: upstream MCP servers whose tools runs may bind
        (``{"global": "gh", "mcp": "<server>"}``, docs/mcp.md): the path of an ``mcpServers``
        file, or its content as a mapping (written to a private temporary file that is removed
        once the daemon has read it).
        """
        with mcp_config_file(mcp_config) as mcp_path:
            return await cls._start(command, env, cwd, stderr, client_name, initialize_timeout, cancel_grace,
                                    sync_bindings_in_thread, mcp_path)

    @classmethod
    async def _start(
        cls,
        command: Union[str, Sequence[str], None],
        env: Optional[Mapping[str, Optional[str]]],
        cwd: Optional[str],
        stderr: Any,
        client_name: str,
        initialize_timeout: float,
        cancel_grace: float,
        sync_bindings_in_thread: bool,
        mcp_path: Optional[str],
    ) -> "Client":
        if command is None or isinstance(command, str):
            argv = [find_daemon(command, env)]
        else:
            argv = [str(a) for a in command]
            if not argv:
                raise ValueError("command must not be empty")
            argv[0] = find_daemon(argv[0], env)
        if mcp_path is not None:
            argv += ["--mcp-config", mcp_path]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=_stderr_target(stderr),
            env=merged_env(env),
            cwd=cwd,
        )
        assert proc.stdout is not None and proc.stdin is not None
        client = cls(
            proc.stdout,
            proc.stdin,
            process=proc,
            cancel_grace=cancel_grace,
            sync_bindings_in_thread=sync_bindings_in_thread,
        )
        await client._initialize_or_abort(client_name, initialize_timeout)
        return client

    @classmethod
    async def attach(
        cls,
        reader: StreamReaderLike,
        writer: StreamWriterLike,
        *,
        client_name: str = "coderun-python",
        initialize_timeout: float = 30.0,
        cancel_grace: float = 5.0,
        sync_bindings_in_thread: bool = True,
    ) -> "Client":
        """Speak to a daemon over given streams (e.g. a socket pair); initializes it."""
        client = cls(reader, writer, cancel_grace=cancel_grace, sync_bindings_in_thread=sync_bindings_in_thread)
        await client._initialize_or_abort(client_name, initialize_timeout)
        return client

    @classmethod
    async def connect(
        cls,
        address: str,
        *,
        token: Optional[str] = None,
        client_name: str = "coderun-python",
        initialize_timeout: float = 30.0,
        cancel_grace: float = 5.0,
        sync_bindings_in_thread: bool = True,
    ) -> "Client":
        """Connect to a daemon in service mode (``coderun-rpc serve``) and initialize it.

        ``address`` is ``unix:PATH``, ``tcp:HOST:PORT`` or ``ws://HOST:PORT/PATH`` (also
        ``wss://``; WebSocket needs the ``ws`` extra: ``pip install 'coderun[ws]'``);
        ``token`` is the daemon's ``CODERUN_AUTH_TOKEN``, sent as the connection's first header
        line (on WebSocket, the upgrade's ``Authorization`` header). :meth:`close` ends this
        connection, its runs and its sessions, not the daemon.
        """
        reader, writer = await _open_transport(address, token)
        return await cls.attach(
            reader,
            writer,
            client_name=client_name,
            initialize_timeout=initialize_timeout,
            cancel_grace=cancel_grace,
            sync_bindings_in_thread=sync_bindings_in_thread,
        )

    async def _initialize_or_abort(self, client_name: str, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._initialize(client_name), timeout)
        except BaseException:
            await self._teardown(ClientClosed("initialize failed"))
            raise

    async def _initialize(self, client_name: str) -> None:
        params = {"clientInfo": {"name": client_name}, "capabilities": {}}
        result = await self.request(P.METHOD_INITIALIZE, params)
        if isinstance(result, dict):
            info, caps = result.get("serverInfo"), result.get("capabilities")
            self.server_info = info if isinstance(info, dict) else {}
            self.capabilities = caps if isinstance(caps, dict) else {}
        await self._send(P.build_notification(P.METHOD_INITIALIZED, {}))

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ----------------------------------------------------------------------------- public API

    @property
    def closed(self) -> bool:
        """True once the connection is gone (closed by us or lost)."""
        return self._lost is not None

    @property
    def process(self) -> Optional[asyncio.subprocess.Process]:
        """The daemon process when started with :meth:`start`."""
        return self._process

    async def run(
        self,
        program: str,
        *,
        bindings: Optional[Bindings] = None,
        error_classes: Optional[ErrorClasses] = None,
        limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
        on_log: Optional[LogCallback] = None,
        stream: Optional[bool] = None,
        traceparent: Optional[str] = None,
        files: Optional[Files] = None,
        on_output: Optional[OutputCallback] = None,
        session_id: Optional[str] = None,
        packages: Optional[Sequence[str]] = None,
        egress: Optional[Sequence[EgressRule]] = None,
        secrets: Optional[Sequence[Secret]] = None,
    ) -> RunResult:
        """Run ``program`` and return its :class:`RunResult` (failures are results).

        Cancelling the awaiting task sends ``$/cancelRequest`` for the run, waits up to
        ``cancel_grace`` seconds for the daemon's ``abort`` answer (so the child is stopped
        before this returns), then re-raises :class:`asyncio.CancelledError`. To get the abort
        result instead, use :meth:`submit` and :meth:`RunHandle.cancel`.

        ``files`` (``{path: str | bytes}``) are written into the working directory before the
        program starts; the result's ``outputs`` and ``files`` carry what it displayed and left
        under ``out/``; ``on_output`` receives each output as it is displayed.
        ``session_id`` runs it in that session (prefer :meth:`Session.run`).
        ``packages`` (``["requests", "scipy==1.14.1"]``) are installed by the daemon before the
        program starts, from what its ``CODERUN_PACKAGES`` allows; a set that cannot be installed
        is an ``exception`` result naming the package (a session takes them at open instead).
        ``egress`` narrows the daemon's egress policy for this run (entries within it; ``[]``:
        none); the result's ``egress`` lists the requests made through the proxy. ``secrets``
        are credentials the proxy adds to this run's requests to their hosts (not in a session,
        which has the daemon's); the program never sees their values.

        Raises :class:`InvalidParams` (refused params), :class:`QueueFull`,
        :class:`ConnectionLost`, TypeError/ValueError for misuse, :class:`RequestTooLarge`,
        :class:`SessionNotOpen` for a session that is not open.
        """
        handle = await self.submit(
            program,
            bindings=bindings,
            error_classes=error_classes,
            limits=limits,
            on_log=on_log,
            stream=stream,
            files=files,
            on_output=on_output,
            session_id=session_id,
            traceparent=traceparent,
            packages=packages,
            egress=egress,
            secrets=secrets,
        )
        try:
            return await handle.result()
        except asyncio.CancelledError:
            await self._cancel_and_wait(handle)
            raise

    async def _cancel_and_wait(self, handle: RunHandle) -> None:
        try:
            if handle.cancel():
                await asyncio.wait_for(asyncio.shield(handle._state.future), self._cancel_grace)
        except asyncio.CancelledError:
            pass  # cancelled again while waiting: stop waiting, the caller re-raises
        except Exception:  # noqa: BLE001 - timeout or a lost connection: nothing more to do
            pass

    async def submit(
        self,
        program: str,
        *,
        bindings: Optional[Bindings] = None,
        error_classes: Optional[ErrorClasses] = None,
        limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
        on_log: Optional[LogCallback] = None,
        stream: Optional[bool] = None,
        traceparent: Optional[str] = None,
        files: Optional[Files] = None,
        on_output: Optional[OutputCallback] = None,
        session_id: Optional[str] = None,
        packages: Optional[Sequence[str]] = None,
        egress: Optional[Sequence[EgressRule]] = None,
        secrets: Optional[Sequence[Secret]] = None,
    ) -> RunHandle:
        """Send a ``run`` request (in session ``session_id`` when given) and return its
        :class:`RunHandle` without waiting for it.

        ``traceparent``: the W3C trace context of the caller's span; the daemon's run span
        becomes its child (and its binding calls carry the daemon's).
        """
        table, classes = _check_run_args(program, bindings, error_classes, limits, on_log)
        if on_output is not None and not callable(on_output):
            raise TypeError("on_output must be callable")
        if session_id is not None and not isinstance(session_id, str):
            raise TypeError(f"session_id must be a str, not {type(session_id).__name__}")
        entries = build_files(files) if files is not None else []
        self._check_open()
        rid = next(self._ids)
        want_stream = bool(on_log or on_output) if stream is None else bool(stream)
        params = P.build_run_params(program, _declarations(table), classes, limits, want_stream, entries, session_id)
        if traceparent is not None:
            params["traceparent"] = traceparent
        if packages is not None:
            params["packages"] = _check_packages(packages)
        if egress is not None:
            if isinstance(egress, (str, bytes)) or not isinstance(egress, Sequence):
                raise TypeError("egress must be a list of entries")
            params["egress"] = [e if isinstance(e, str) else dict(e) for e in egress]
        if secrets is not None:
            params["secrets"] = _secret_entries(secrets)
        body = P.build_request(rid, P.METHOD_RUN, params)  # LossyValueError / RequestTooLarge
        state = _RunState(rid, _handlers(table), on_log, on_output)
        self._runs[rid] = state
        self._pending[rid] = state.future
        state.future.add_done_callback(lambda _f: self._runs.pop(rid, None))
        if session_id is not None:
            state.future.add_done_callback(functools.partial(self._note_session_run, session_id))
        handle = RunHandle(self, state)
        try:
            await self._send(body)
        except asyncio.CancelledError:
            await self._cancel_and_wait(handle)  # the request is already buffered: stop the run
            raise
        except BaseException:
            self._pending.pop(rid, None)
            self._runs.pop(rid, None)
            raise
        return handle

    async def describe(
        self,
        *,
        bindings: Optional[Bindings] = None,
        error_classes: Optional[ErrorClasses] = None,
        limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
        packages: Optional[Sequence[str]] = None,
    ) -> str:
        """The Python stubs a run with these bindings and limits would expose (``bindings/describe``):
        one class per namespace, a docstring and signature per function, and the run's budgets in
        a leading comment — the text to put in a model's prompt. With packages on demand the
        comment also lists ``packages`` (those the run will name) and what the daemon allows.

        Raises :class:`InvalidParams` for a declaration the daemon refuses (the message names its
        path), TypeError/ValueError for misuse (as :meth:`run`), :class:`ProtocolViolation` when the
        answer has no ``stubs`` text."""
        table, classes = _check_declarations(bindings, error_classes, limits)
        params = P.build_describe_params(_declarations(table), classes, limits)
        if packages is not None:
            params["packages"] = _check_packages(packages)
        result = await self.request(P.METHOD_DESCRIBE, params)
        stubs = result.get("stubs") if isinstance(result, dict) else None
        if not isinstance(stubs, str):
            raise ProtocolViolation(f"bindings/describe answered without stubs text: {result!r}")
        return stubs

    # ----------------------------------------------------------------------------- sessions

    def session(
        self,
        *,
        limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
        idle_timeout_ms: Optional[int] = None,
        packages: Optional[Sequence[str]] = None,
        secrets: Optional[Sequence[Secret]] = None,
    ) -> SessionOpener:
        """A persistent session: ``async with client.session(limits=...) as s:`` opens it
        (``session/open``) and closes it at the end of the block; ``s = await client.session()``
        opens it only. ``limits`` are the defaults of its runs (``addressSpaceMb`` is fixed for
        its lifetime); ``idle_timeout_ms``: no run for that long closes it; ``packages`` are
        installed for every run of the session (as :meth:`run`'s; one that cannot be installed
        refuses the open with :class:`InvalidParams`); ``secrets`` are credentials the egress
        proxy adds to every run of the session (as :meth:`run`'s).

        Raises :class:`SessionLimitReached` at the daemon's cap, :class:`InvalidParams` for bad
        params, :class:`MethodNotFound` when the daemon has sessions disabled."""
        if limits is not None and not isinstance(limits, Mapping):
            raise TypeError("limits must be a mapping such as {'maxWallMs': 5000}")
        if idle_timeout_ms is not None and (not isinstance(idle_timeout_ms, int) or isinstance(idle_timeout_ms, bool)):
            raise TypeError(f"idle_timeout_ms must be an int, not {type(idle_timeout_ms).__name__}")
        params: dict[str, Any] = {}
        if limits is not None:
            params["limits"] = dict(limits)
        if idle_timeout_ms is not None:
            params["idleTimeoutMs"] = idle_timeout_ms
        if packages is not None:
            params["packages"] = _check_packages(packages)
        if secrets is not None:
            params["secrets"] = _secret_entries(secrets)
        return SessionOpener(self, params)

    async def open_session(
        self,
        *,
        limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
        idle_timeout_ms: Optional[int] = None,
        packages: Optional[Sequence[str]] = None,
        secrets: Optional[Sequence[Secret]] = None,
    ) -> Session:
        """Open a session and return it (:meth:`session` without the ``async with``)."""
        return await self.session(limits=limits, idle_timeout_ms=idle_timeout_ms, packages=packages, secrets=secrets)

    def on_session_closed(self, callback: SessionClosedCallback) -> Callable[[], None]:
        """``callback`` runs for every ``session/closed`` notification (a session the daemon ended
        on its own: idle time, loss, shutdown), after the :class:`Session` was updated. It may be
        a coroutine function. Returns a function that removes it."""
        return subscribe(self._session_listeners, callback)

    async def _open_session(self, params: dict[str, Any]) -> Session:
        return self._adopt_session(await self.request(P.METHOD_SESSION_OPEN, params))

    async def _session_request(self, method: str, session_id: str) -> Any:
        """A request naming one session; a ``session not open`` answer ends the client's view of it."""
        try:
            return await self.request(method, {"sessionId": session_id})
        except SessionNotOpen as e:
            self._session_gone(session_id, e)
            raise

    def _adopt_session(self, result: Any) -> Session:
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(sid, str):
            raise ProtocolViolation(f"session result has no sessionId: {result!r}"[:300])
        session = Session(self, sid)
        self._sessions[sid] = session
        return session

    def _forget_session(self, session: Session) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]

    def _session_gone(self, session_id: str, e: SessionNotOpen) -> None:
        session = self._sessions.get(session_id)
        if session is not None and e.state in ("closed", "lost"):
            session._end("lost" if e.state == "lost" else "closed", e.reason or e.state)

    def _note_session_run(self, session_id: str, fut: "asyncio.Future[Any]") -> None:
        """A session run settled: a result with ``session.alive`` false, or a ``session not open``
        answer, means the session has ended."""
        if fut.cancelled():
            return
        e = fut.exception()
        if isinstance(e, SessionNotOpen):
            self._session_gone(session_id, e)
            return
        info = fut.result().get("session") if e is None and isinstance(fut.result(), dict) else None
        session = self._sessions.get(session_id)
        if session is not None and isinstance(info, dict) and info.get("alive") is False:
            reason = info.get("reason")
            session._end("lost", reason if isinstance(reason, str) else "lost")

    def _on_session_closed(self, params: dict[str, Any]) -> None:
        sid, reason, message = params.get("sessionId"), params.get("reason"), params.get("message")
        if not isinstance(sid, str) or not isinstance(reason, str):
            return
        event = SessionClosed(sid, reason, message if isinstance(message, str) else "")
        session = self._sessions.get(sid)
        if session is not None:
            session._notify_closed(event)
        fire(self._session_listeners, event)

    async def request(self, method: str, params: Any = None) -> Any:
        """Send any request and return its result (low level; raises typed RpcError)."""
        self._check_open()
        return await self._request(method, params)

    async def _request(self, method: str, params: Any = None) -> Any:
        if self._lost is not None:
            raise self._lost_error()
        rid = next(self._ids)
        body = P.build_request(rid, method, params)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            await self._send(body)
            return await fut
        finally:
            self._pending.pop(rid, None)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (low level)."""
        self._check_open()
        await self._send(P.build_notification(method, params))

    async def close(self, *, shutdown_timeout: Optional[float] = None) -> None:
        """``shutdown`` + ``exit``, then wait for the daemon to exit (killed if it does not).

        Runs still live are answered ``abort`` by the daemon. Idempotent; bounded in time."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        try:
            if self._lost is None:
                await self._shutdown(shutdown_timeout if shutdown_timeout is not None else self._default_shutdown_timeout())
        finally:
            await self._teardown(ClientClosed("the client was closed"))

    def _default_shutdown_timeout(self) -> float:
        limits = self.capabilities.get("limits")
        grace = limits.get("graceMs") if isinstance(limits, dict) else None
        grace_s = grace / 1000 if isinstance(grace, int) else 3.0
        return min(max(10.0, grace_s * 2 + 5.0), 120.0)

    async def _shutdown(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._request(P.METHOD_SHUTDOWN), timeout)
            self._send_nowait(P.build_notification(P.METHOD_EXIT))
            await asyncio.wait_for(self._drain(), 2.0)
        except (CodeRunError, asyncio.TimeoutError, OSError) as e:
            log.debug("coderun: shutdown did not complete: %s", e)

    async def _teardown(self, reason: ConnectionLost) -> None:
        try:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - already closed
                pass
            if self._process is not None:
                await self._reap(self._process)
            try:
                await asyncio.wait_for(asyncio.shield(self._reader_task), 1.0)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001
                pass
        finally:
            if self._process is not None and self._process.returncode is None:
                _kill(self._process)  # cancelled mid-teardown: never leave the daemon behind
            self._reader_task.cancel()
            if self._watch_task is not None:
                self._watch_task.cancel()
            if self._stderr_task is not None:
                self._stderr_task.cancel()
            self._connection_lost(reason)
            self._closed.set()

    @staticmethod
    async def _reap(proc: asyncio.subprocess.Process) -> None:
        """Wait for the daemon to exit after stdin EOF; kill it if it does not."""
        try:
            await asyncio.wait_for(proc.wait(), 5.0)
            return
        except asyncio.TimeoutError:
            _kill(proc)
        try:
            await asyncio.wait_for(proc.wait(), 5.0)
        except asyncio.TimeoutError:
            log.warning("coderun: daemon pid %s did not exit after SIGKILL", proc.pid)

    # ----------------------------------------------------------------------------- sending

    def _lost_error(self) -> ConnectionLost:
        """A fresh exception for the loss (one instance per raise keeps tracebacks apart)."""
        lost = self._lost or ConnectionLost("connection lost")
        return type(lost)(*lost.args)

    def _check_open(self) -> None:
        if self._lost is not None:
            raise self._lost_error()
        if self._closing:
            raise ClientClosed("the client is closing")

    def _send_nowait(self, body: bytes) -> None:
        if self._lost is not None:
            raise self._lost_error()
        self._writer.write(frame_header(len(body)))
        self._writer.write(body)

    async def _drain(self) -> None:
        async with self._drain_lock:
            try:
                await self._writer.drain()
            except (ConnectionError, OSError) as e:
                await self._note_exit_code()
                self._connection_lost(ConnectionLost(self._describe_loss(f"writing to the daemon failed: {e}")))
                raise self._lost_error() from None

    async def _send(self, body: bytes) -> None:
        self._send_nowait(body)
        await self._drain()

    # ----------------------------------------------------------------------------- receiving

    async def _read_loop(self) -> None:
        parser = FrameParser()
        reason = "the daemon closed its stdout"
        try:
            while True:
                data = await self._reader.read(1 << 16)
                if not data:
                    break
                for body in parser.feed(data):
                    self._dispatch(P.parse_message(body))
        except FramingError as e:
            reason = f"the daemon sent an unusable frame: {e}"
        except (ConnectionError, OSError) as e:
            reason = f"reading from the daemon failed: {e}"
        except Exception as e:  # noqa: BLE001 - a bug here must still fail what is pending
            log.exception("coderun: read loop failed")
            reason = f"the client's read loop failed: {e!r}"
        await self._note_exit_code()
        self._connection_lost(ConnectionLost(self._describe_loss(reason)))

    async def _note_exit_code(self) -> None:
        if self._process is not None and not self._closing:
            try:
                await asyncio.wait_for(asyncio.shield(self._process.wait()), 0.5)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001
                pass
            await self._settle_stderr()

    async def _keep_stderr_tail(self, stream: asyncio.StreamReader) -> None:
        """Keep the last STDERR_TAIL bytes the daemon writes on stderr, until its end."""
        while True:
            chunk = await stream.read(1 << 16)
            if not chunk:
                return
            self._stderr_tail = (self._stderr_tail + chunk)[-STDERR_TAIL:]

    async def _settle_stderr(self) -> None:
        """Once the daemon has exited, let its last stderr words arrive (bounded)."""
        if self._stderr_task is not None and self._process is not None and self._process.returncode is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 0.5)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001
                pass

    def _stderr_words(self) -> str:
        """The daemon's last three stderr lines, joined, or ""."""
        lines = self._stderr_tail.decode("utf-8", "replace").strip().splitlines()
        return " | ".join(line.strip() for line in lines[-3:])

    def _describe_loss(self, reason: str) -> str:
        if self._refusal is not None:
            return f"the daemon refused the connection: {self._refusal}"
        rc = self._process.returncode if self._process is not None else None
        if rc is None:
            return reason
        how = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
        words = self._stderr_words()
        return f"{reason}: the daemon {how}" + (f" (stderr: {words})" if words else "")

    async def _watch_process(self, proc: asyncio.subprocess.Process) -> None:
        await proc.wait()
        await self._settle_stderr()
        try:  # let the reader consume what is left before failing what is pending
            await asyncio.wait_for(asyncio.shield(self._reader_task), 1.0)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001
            pass
        self._connection_lost(ConnectionLost(self._describe_loss("the daemon process ended")))

    def _connection_lost(self, exc: ConnectionLost) -> None:
        """Fail every pending call at once and cancel every binding task (idempotent)."""
        if self._lost is None:
            if self._closing and not isinstance(exc, ClientClosed):
                exc = ClientClosed(f"the client was closed ({exc})")
            self._lost = exc
            if not self._closing:
                log.warning("coderun: connection to the daemon lost: %s", exc)
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(self._lost_error())
                fut.exception()  # mark retrieved: a run nobody awaits must not warn
        tasks, self._binding_tasks = self._binding_tasks, {}
        for task in tasks.values():
            task.cancel()
        for session in list(self._sessions.values()):
            session._end("lost", str(self._lost))

    def _dispatch(self, msg: P.Message) -> None:
        if isinstance(msg, P.Response):
            self._on_response(msg)
        elif isinstance(msg, P.Request):
            self._on_request(msg)
        elif isinstance(msg, P.Notification):
            self._on_notification(msg)
        else:
            self._on_malformed(msg)

    def _on_response(self, msg: P.Response) -> None:
        fut = self._pending.pop(msg.id, None) if msg.id is not None else None
        if fut is None:
            if msg.id is None and msg.is_error and isinstance(msg.error, dict):
                # A daemon in service mode explains a refused connection this way, then closes.
                self._refusal = str(msg.error.get("message"))
            if msg.is_error:
                log.warning("coderun: daemon error for id %r: %r", msg.id, msg.error)
            return
        if fut.done():
            return
        if msg.is_error:
            fut.set_exception(error_from_response(msg.error))
            fut.exception()
        else:
            fut.set_result(msg.result)

    def _on_malformed(self, msg: P.Malformed) -> None:
        log.warning("coderun: unusable message from the daemon: %s", msg.reason)
        if msg.id is not None:
            self._reply(P.build_error_response(msg.id, P.CODE_INVALID_PARAMS, msg.reason))

    def _reply(self, body: bytes) -> None:
        try:
            self._send_nowait(body)
        except ConnectionLost:
            pass

    def _on_notification(self, msg: P.Notification) -> None:
        params = msg.params if isinstance(msg.params, dict) else {}
        if msg.method == P.METHOD_RUN_LOG:
            self._on_run_log(params)
        elif msg.method == P.METHOD_RUN_OUTPUT:
            self._on_run_output(params)
        elif msg.method == P.METHOD_SESSION_CLOSED:
            self._on_session_closed(params)
        elif msg.method == P.METHOD_CANCEL:
            task = self._binding_tasks.pop(params.get("id"), None)
            if task is not None:
                task.cancel()

    def _on_run_log(self, params: dict[str, Any]) -> None:
        state = self._runs.get(params.get("runId"))
        if state is None or state.on_log is None:
            return
        index, text = params.get("index"), params.get("text")
        if not isinstance(index, int) or not isinstance(text, str):
            return
        self._deliver(state, state.on_log, LogEvent(state.id, index, text, params.get("continued") is True))

    def _on_run_output(self, params: dict[str, Any]) -> None:
        state = self._runs.get(params.get("runId"))
        index, output = params.get("index"), parse_output(params)
        if state is None or state.on_output is None or not isinstance(index, int) or output is None:
            return
        self._deliver(state, state.on_output, OutputEvent(state.id, index, output))

    @staticmethod
    def _deliver(state: _RunState, callback: Callable[[Any], Any], event: Any) -> None:
        """One streamed event to its callback; awaitables are chained so they finish in order
        (logs and outputs share the chain)."""
        try:
            outcome = callback(event)
        except Exception:  # noqa: BLE001 - a callback bug must not break the connection
            log.exception("coderun: stream callback raised")
            return
        if inspect.isawaitable(outcome):
            state.log_chain = asyncio.ensure_future(_after(state.log_chain, outcome))

    def _on_request(self, msg: P.Request) -> None:
        if msg.method != P.METHOD_BINDING_CALL:
            self._reply(P.build_error_response(msg.id, P.CODE_METHOD_NOT_FOUND, f"method not found: {msg.method}"))
            return
        params = msg.params if isinstance(msg.params, dict) else {}
        state = self._runs.get(params.get("runId"))
        ns, name = params.get("namespace"), params.get("function")
        fn = None
        if state is not None and isinstance(ns, str) and isinstance(name, str):
            fn = state.bindings.get(ns, {}).get(name)
        if fn is None:
            what = f"{ns}.{name}" if isinstance(ns, str) and isinstance(name, str) else "binding"
            self._reply(P.build_error_response(msg.id, P.CODE_METHOD_NOT_FOUND, f"no {what} for run {params.get('runId')!r}"))
            return
        task = asyncio.ensure_future(self._call_binding(msg.id, fn, params.get("args")))
        self._binding_tasks[msg.id] = task
        task.add_done_callback(functools.partial(self._forget_binding, msg.id))

    def _forget_binding(self, rid: Any, task: "asyncio.Task[None]") -> None:
        if self._binding_tasks.get(rid) is task:
            del self._binding_tasks[rid]

    def _abandoned(self, rid: Any) -> bool:
        """True when the client itself gave up call ``rid``: on the daemon's ``$/cancelRequest``
        and when the connection goes, the call's task is removed from ``_binding_tasks`` before
        it is cancelled, so a task that is no longer registered was cancelled by us."""
        return self._binding_tasks.get(rid) is not asyncio.current_task()

    async def _call_binding(self, rid: Any, binding: Binding, args: Any) -> None:
        """Answer binding call ``rid`` with the binding's value for ``args``, or with an error if
        it raises (or its arguments cannot be mapped to its signature).

        Every way ``fn`` can end is answered, so the program's ``await`` never hangs: an
        Exception, and also a BaseException that is not one, e.g. a CancelledError the binding
        raised itself or got from a Task.cancel that was not ours (the program sees "binding was
        cancelled"). KeyboardInterrupt and SystemExit are answered, then re-raised. Only a call
        the client abandoned (see :meth:`_abandoned`) goes unanswered, its exception propagating:
        the daemon has stopped waiting for it.
        """
        try:
            positional, keywords = binding.arguments(args)
            fn = binding.fn
            if inspect.iscoroutinefunction(fn):
                value = await fn(*positional, **keywords)
            else:
                call = functools.partial(fn, *positional, **keywords)
                value = await asyncio.to_thread(call) if self._sync_in_thread else call()
                if inspect.isawaitable(value):
                    value = await value
            body = P.response_for_value(rid, binding.result(value))
        except Exception as e:  # noqa: BLE001 - becomes a JSON-RPC error in the program
            body = P.build_error_response(rid, P.CODE_BINDING_FAILED, _text(e), {"type": P.builtin_type_name(e)})
        except BaseException as e:
            if self._abandoned(rid):
                raise  # the daemon no longer needs the answer (or the client is closing)
            message = _base_exception_message(e)
            body = P.build_error_response(rid, P.CODE_BINDING_FAILED, message, {"type": type(e).__name__})
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                # They ask the host process to stop, which a tool call must not swallow: answer
                # the program now (a buffered write, no await) and let them leave the event loop.
                self._reply(body)
                raise
        try:
            await self._send(body)
        except ConnectionLost:
            pass


def _base_exception_message(e: BaseException) -> str:
    """The error message for a binding's BaseException that is not an Exception: it says what
    happened, since such exceptions rarely carry a message of their own."""
    what = "binding was cancelled" if isinstance(e, asyncio.CancelledError) else f"binding raised {type(e).__name__}"
    detail = _text(e)
    return f"{what}: {detail}" if detail else what


def _text(e: BaseException) -> str:
    """``str(e)`` (a ``KeyError``'s key as text, not its repr), or a note that it failed: a
    hostile ``__str__`` must not leave the call unanswered."""
    try:
        if isinstance(e, KeyError) and len(e.args) == 1 and isinstance(e.args[0], str):
            return e.args[0]
        return str(e)
    except Exception:  # noqa: BLE001
        return f"<{type(e).__name__}: str() failed>"


STDERR_TAIL = 8192
"""How much of the daemon's stderr a client started with ``stderr="pipe"`` keeps."""


def _stderr_target(stderr: Any) -> Any:
    """The subprocess stderr argument for :meth:`Client.start`'s ``stderr``."""
    if isinstance(stderr, str):
        named = {"pipe": asyncio.subprocess.PIPE, "inherit": None, "ignore": asyncio.subprocess.DEVNULL}
        if stderr not in named:
            raise ValueError(f'stderr must be "pipe", "inherit", "ignore", a file or a descriptor, not {stderr!r}')
        return named[stderr]
    return stderr


async def describe_without_daemon(
    *,
    bindings: Optional[Bindings] = None,
    error_classes: Optional[ErrorClasses] = None,
    limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
    packages: Optional[Sequence[str]] = None,
    command: Optional[str] = None,
    env: Optional[Mapping[str, Optional[str]]] = None,
) -> str:
    """:meth:`Client.describe`'s text without a running daemon: ``coderun-rpc describe`` (the
    binary :meth:`Client.start` would run for ``command``, with ``env`` layered over
    ``os.environ``) renders it from the configuration such a daemon would load, and exits.
    Bindings backed by an MCP server are refused (only a running daemon reaches the server).

    Raises :class:`InvalidParams` for params the daemon refuses (its message), TypeError/ValueError
    for misuse (as :meth:`Client.describe`), :class:`CodeRunError` with the daemon's start-up line
    for a configuration it refuses."""
    table, classes = _check_declarations(bindings, error_classes, limits)
    params = P.build_describe_params(_declarations(table), classes, limits)
    if packages is not None:
        params["packages"] = _check_packages(packages)
    proc = await asyncio.create_subprocess_exec(
        find_daemon(command, env), "describe",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=merged_env(env),
    )
    try:
        out, err = await proc.communicate(_json.encode(params))
    except BaseException:
        _kill(proc)
        await proc.wait()
        raise
    if proc.returncode == 0:
        return out.decode("utf-8")
    said = err.decode("utf-8", "replace").strip()[-_DESCRIBE_STDERR_KEPT:]
    at = ("\n" + said).rfind(_DESCRIBE_REFUSAL)  # after the log's warnings, if any
    if proc.returncode == 2 and at >= 0:
        raise InvalidParams(said[at + len(_DESCRIBE_REFUSAL) - 1:])
    raise CodeRunError(f"coderun-rpc describe exited with {proc.returncode}: {said}")


_DESCRIBE_REFUSAL = "\ncoderun-rpc describe: "
"""How a line of ``coderun-rpc describe``'s stderr starts with the message of params it refuses."""

_DESCRIBE_STDERR_KEPT = 8192
"""The characters of ``coderun-rpc describe``'s stderr an error keeps (its last ones)."""


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        proc.kill()
    except (ProcessLookupError, OSError):
        pass


async def _after(previous: Optional["asyncio.Future[None]"], outcome: Awaitable[Any]) -> None:
    if previous is not None:
        await previous
    try:
        await outcome
    except Exception:  # noqa: BLE001
        log.exception("coderun: stream callback raised")


async def _open_transport(address: str, token: Optional[str]) -> tuple[StreamReaderLike, StreamWriterLike]:
    """Open ``address`` and present ``token`` as its transport does."""
    if address.startswith(("ws://", "wss://")):
        return await open_websocket(address, token)
    reader, writer = await _open_connection(address)
    if token is not None:
        writer.write(f"Authorization: Bearer {token}\r\n".encode("ascii"))
    return reader, writer


async def _open_connection(address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open ``unix:PATH`` or ``tcp:HOST:PORT``; a bad address raises ValueError naming it."""
    if address.startswith("unix:") and len(address) > len("unix:"):
        return await asyncio.open_unix_connection(address[len("unix:") :])
    if address.startswith("tcp:"):
        host, sep, port = address[len("tcp:") :].rpartition(":")
        if sep and host and port.isdigit():
            return await asyncio.open_connection(host.strip("[]"), int(port))
        raise ValueError(f"address {address!r}: tcp: needs HOST:PORT")
    raise ValueError(f"address {address!r}: must be unix:PATH, tcp:HOST:PORT or ws://HOST:PORT/PATH")


def _secret_entries(secrets: Sequence[Secret]) -> list[dict[str, Any]]:
    """``secrets`` as the wire's list of entries (TypeError for anything but a list)."""
    if isinstance(secrets, (str, bytes, Mapping)) or not isinstance(secrets, Sequence):
        raise TypeError("secrets must be a list of entries")
    return [dict(s) for s in secrets]


def _check_packages(packages: Sequence[str]) -> list[str]:
    """``packages`` as the daemon reads it: a list of requirement strings (it validates each)."""
    if isinstance(packages, (str, bytes)) or not isinstance(packages, Sequence):
        raise TypeError("packages must be a sequence of requirement strings such as ['requests']")
    out = list(packages)
    for p in out:
        if not isinstance(p, str):
            raise TypeError(f"packages entries must be str, not {type(p).__name__}")
    return out
