"""Persistent sessions (docs/protocol-sessions.md §11): one long-lived interpreter whose top-level names
survive from one run to the next.

The client creates them (:meth:`Client.session`, :meth:`Client.open_session`,
:meth:`Session.fork`); this module keeps what the client knows of a session's state and turns a
call on a session that has ended into :class:`~coderun.errors.SessionNotOpen` without a round
trip.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING, Any, Callable, Generator, Literal, Mapping, Optional, Union

from . import protocol as P
from .errors import ConnectionLost, SessionNotOpen
from .types import Limits, RunResult, SessionClosed

if TYPE_CHECKING:
    from ._outputs import Files
    from .client import Bindings, Client, ErrorClasses, LogCallback, OutputCallback

__all__ = ["Session", "SessionOpener", "SessionState", "SessionClosedCallback"]

log = logging.getLogger("coderun")

SessionState = Literal["open", "closed", "lost"]

SessionClosedCallback = Callable[[SessionClosed], Any]
"""Called with each ``session/closed`` notification; may return an awaitable."""


class Session:
    """One open session. Runs on it execute one at a time, in order; :meth:`fork` copies its
    state into a new session; :meth:`close` (or ``async with``) ends it. For a run to cancel,
    ``client.submit(program, session_id=s.id)`` gives its handle (cancelling a queued run leaves
    the session open; cancelling a live one ends it).

    Once the session is closed or lost, :meth:`run` and :meth:`fork` raise
    :class:`~coderun.errors.SessionNotOpen` naming the session, its state and reason."""

    def __init__(self, client: "Client", session_id: str) -> None:
        self._client = client
        self._id = session_id
        self._state: SessionState = "open"
        self._reason: Optional[str] = None
        self._closing: Optional[asyncio.Future[None]] = None
        self._listeners: list[SessionClosedCallback] = []

    @property
    def id(self) -> str:
        """The daemon's ``sessionId``."""
        return self._id

    @property
    def state(self) -> SessionState:
        """``"open"`` until it is closed (:meth:`close`, idle time, shutdown) or lost."""
        return self._state

    @property
    def reason(self) -> Optional[str]:
        """Why the session is no longer open (``closed``, ``idle``, ``shutdown`` or how it was lost)."""
        return self._reason

    def __repr__(self) -> str:
        return f"<Session {self._id} {self._state}>"

    async def run(
        self,
        program: str,
        *,
        bindings: Optional["Bindings"] = None,
        error_classes: Optional["ErrorClasses"] = None,
        limits: Optional[Union[Limits, Mapping[str, Any]]] = None,
        on_log: Optional["LogCallback"] = None,
        stream: Optional[bool] = None,
        files: Optional["Files"] = None,
        on_output: Optional["OutputCallback"] = None,
    ) -> RunResult:
        """Run ``program`` in the session (as :meth:`Client.run`): names it binds at the top level
        stay for later runs, and so do the files in its directory; ``out/`` is emptied before each
        run. Bindings and budgets are per run; ``limits["addressSpaceMb"]`` is refused (it is
        fixed at open). A result whose ``session.alive`` is false ended the session."""
        self._check_open()
        return await self._client.run(
            program,
            bindings=bindings,
            error_classes=error_classes,
            limits=limits,
            on_log=on_log,
            stream=stream,
            files=files,
            on_output=on_output,
            session_id=self._id,
        )

    async def fork(self) -> "Session":
        """A new session whose interpreter is a copy of this one's state (after any run in flight).
        The two diverge from here. Raises :class:`~coderun.errors.SessionLimitReached` at the cap."""
        self._check_open()
        result = await self._client._session_request(P.METHOD_SESSION_FORK, self._id)
        return self._client._adopt_session(result)

    async def close(self) -> None:
        """End the session: runs queued on it settle ``abort``; returns once the daemon has stopped
        its interpreter. Idempotent; returns at once for a session already closed or lost, and when
        the daemon is gone (the session went with it)."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        if self._state != "open":
            return
        try:
            await self._client._session_request(P.METHOD_SESSION_CLOSE, self._id)
        except (SessionNotOpen, ConnectionLost):  # ClientClosed is a ConnectionLost
            pass  # already gone, or gone with the daemon: nothing left to close
        self._end("closed", "closed")

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def on_closed(self, callback: SessionClosedCallback) -> Callable[[], None]:
        """``callback`` runs when the daemon ends this session on its own (``session/closed``:
        idle time, loss, shutdown), never for :meth:`close`. Returns a function that removes it."""
        return subscribe(self._listeners, callback)

    # ------------------------------------------------------------------ called by the client

    def _notify_closed(self, event: SessionClosed) -> None:
        lost = event.reason == "lost"
        self._end("lost" if lost else "closed", event.message if lost else event.reason)
        fire(self._listeners, event)

    def _end(self, state: SessionState, reason: str) -> None:
        """Mark the session as no longer open (the first state and reason stick)."""
        if self._state != "open":
            return
        self._state = state
        self._reason = reason
        self._client._forget_session(self)

    def _check_open(self) -> None:
        if self._state == "open":
            return
        why = "" if self._reason in (None, self._state) else f" ({self._reason})"
        data = {"sessionId": self._id, "state": self._state, "reason": self._reason}
        raise SessionNotOpen(f"session {self._id} is {self._state}{why}", SessionNotOpen.code, data)


class SessionOpener:
    """What :meth:`Client.session` returns: ``async with client.session() as s:`` opens the
    session and closes it at the end of the block; ``s = await client.session()`` only opens it."""

    def __init__(self, client: "Client", params: dict[str, Any]) -> None:
        self._client = client
        self._params = params
        self._session: Optional[Session] = None

    def __await__(self) -> Generator[Any, None, Session]:
        return self._client._open_session(self._params).__await__()

    async def __aenter__(self) -> Session:
        self._session = await self._client._open_session(self._params)
        return self._session

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()


def subscribe(listeners: list[SessionClosedCallback], callback: SessionClosedCallback) -> Callable[[], None]:
    if not callable(callback):
        raise TypeError("the session/closed callback must be callable")
    listeners.append(callback)

    def remove() -> None:
        if callback in listeners:
            listeners.remove(callback)

    return remove


_pending_callbacks: set["asyncio.Future[Any]"] = set()


def fire(listeners: list[SessionClosedCallback], event: SessionClosed) -> None:
    """Call every listener with ``event``; an awaitable one runs as a task. A raising listener is
    logged and never breaks the connection."""
    for callback in list(listeners):
        try:
            outcome = callback(event)
        except Exception:  # noqa: BLE001
            log.exception("coderun: session/closed callback raised")
            continue
        if inspect.isawaitable(outcome):
            task = asyncio.ensure_future(outcome)
            _pending_callbacks.add(task)
            task.add_done_callback(_callback_done)


def _callback_done(task: "asyncio.Future[Any]") -> None:
    _pending_callbacks.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("coderun: session/closed callback raised", exc_info=task.exception())

