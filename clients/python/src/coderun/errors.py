"""Exceptions raised by the client: one type per JSON-RPC error code, plus transport failures."""

from __future__ import annotations

from typing import Any

__all__ = [
    "CodeRunError",
    "RpcError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "QueueFull",
    "NotInitialized",
    "SessionLimitReached",
    "SessionNotOpen",
    "ConnectionLost",
    "ClientClosed",
    "DaemonNotFound",
    "ProtocolViolation",
    "RequestTooLarge",
    "error_from_response",
]


class CodeRunError(Exception):
    """Base class of every error this package raises (besides TypeError/ValueError for misuse)."""


class RpcError(CodeRunError):
    """The daemon answered a request with a JSON-RPC error."""

    code: int = 0

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.data = data

    def __str__(self) -> str:
        return f"{self.message} (JSON-RPC error {self.code})"


class ParseError(RpcError):
    """-32700: the daemon could not parse a message."""

    code = -32700


class InvalidRequest(RpcError):
    """-32600: not a valid request, or the server is shutting down."""

    code = -32600


class MethodNotFound(RpcError):
    """-32601: unknown method."""

    code = -32601


class InvalidParams(RpcError):
    """-32602: the ``run`` params were refused (the message names the field)."""

    code = -32602


class QueueFull(RpcError):
    """-32001: the daemon's run queue is full; retry later."""

    code = -32001


class NotInitialized(RpcError):
    """-32002: a request came before ``initialize``."""

    code = -32002


class SessionLimitReached(RpcError):
    """-32003: ``session/open`` or ``session/fork`` at the daemon's cap (the message names it)."""

    code = -32003


class SessionNotOpen(RpcError):
    """-32004: the session is unknown, closed or lost.

    Raised from the daemon's answer, or by the client without a round trip for a session it
    already knows has ended. ``session_id``, ``state`` (``"unknown"``, ``"closed"``, ``"lost"``)
    and ``reason`` (how it ended, when known) say which and why."""

    code = -32004

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(message, code, data)
        d = data if isinstance(data, dict) else {}
        self.session_id: str = str(d.get("sessionId", ""))
        state = d.get("state")
        self.state: str = state if isinstance(state, str) else "unknown"
        reason = d.get("reason")
        self.reason: str | None = reason if isinstance(reason, str) else None


_BY_CODE: dict[int, type[RpcError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        QueueFull,
        NotInitialized,
        SessionLimitReached,
        SessionNotOpen,
    )
}


def error_from_response(error: Any) -> RpcError:
    """The typed exception for the ``error`` member of a response."""
    if not isinstance(error, dict):
        return RpcError(f"malformed error object {error!r}"[:200], 0)
    code = error.get("code")
    message = error.get("message")
    if not isinstance(message, str):
        message = repr(message)
    if not isinstance(code, int) or isinstance(code, bool):
        return RpcError(message, 0, error.get("data"))
    cls = _BY_CODE.get(code, RpcError)
    return cls(message, code, error.get("data"))


class ConnectionLost(CodeRunError):
    """The daemon went away (exited, was killed, or closed its stdout) with the call pending."""


class ClientClosed(ConnectionLost):
    """The client was closed before or while the call was made."""


class DaemonNotFound(CodeRunError, FileNotFoundError):
    """No usable daemon binary; the message names each place tried (see :func:`coderun.find_daemon`)."""


class ProtocolViolation(CodeRunError):
    """The daemon sent something that breaks the protocol (bad framing, unusable message)."""


class RequestTooLarge(CodeRunError, ValueError):
    """A request would exceed the daemon's 67108864-byte inbound message cap; it was not sent."""
