"""JSON-RPC 2.0 messages for coderun-rpc (I/O-free).

Builders return message bodies (bytes, strict lossless JSON, never above the daemon's inbound
cap); :func:`parse_message` classifies an inbound body. Framing lives in ``_framing``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, Union

from . import _json
from .errors import RequestTooLarge

__all__ = [
    "INBOUND_MESSAGE_CAP",
    "builtin_type_name",
    "LOSSLESS_PREFIX",
    "CAP_MESSAGE",
    "Request",
    "Notification",
    "Response",
    "Malformed",
    "Message",
    "parse_message",
    "build_request",
    "build_notification",
    "build_result_response",
    "build_error_response",
    "build_binding_response",
    "build_run_params",
    "build_describe_params",
    "METHOD_INITIALIZE",
    "METHOD_INITIALIZED",
    "METHOD_SHUTDOWN",
    "METHOD_EXIT",
    "METHOD_CANCEL",
    "METHOD_RUN",
    "METHOD_BINDING_CALL",
    "METHOD_RUN_LOG",
    "METHOD_RUN_OUTPUT",
    "METHOD_DESCRIBE",
    "METHOD_SESSION_OPEN",
    "METHOD_SESSION_FORK",
    "METHOD_SESSION_CLOSE",
    "METHOD_SESSION_CLOSED",
    "CODE_BINDING_FAILED",
    "CODE_REQUEST_CANCELLED",
]

INBOUND_MESSAGE_CAP = 67108864  # docs/protocol.md §2: the daemon refuses larger bodies
LOSSLESS_PREFIX = "binding resolution must be lossless JSON"
CAP_MESSAGE = (
    f"binding result is too large: the response would exceed the daemon's "
    f"{INBOUND_MESSAGE_CAP}-byte inbound message cap"
)
TRUNCATION_MARKER = "… [truncated]"

METHOD_INITIALIZE = "initialize"
METHOD_INITIALIZED = "initialized"
METHOD_SHUTDOWN = "shutdown"
METHOD_EXIT = "exit"
METHOD_CANCEL = "$/cancelRequest"
METHOD_RUN = "run"
METHOD_BINDING_CALL = "binding/call"
METHOD_RUN_LOG = "run/log"
METHOD_RUN_OUTPUT = "run/output"
METHOD_DESCRIBE = "bindings/describe"
METHOD_SESSION_OPEN = "session/open"
METHOD_SESSION_FORK = "session/fork"
METHOD_SESSION_CLOSE = "session/close"
METHOD_SESSION_CLOSED = "session/closed"  # notification, daemon -> client

CODE_BINDING_FAILED = -32000  # a binding raised (application error)
CODE_METHOD_NOT_FOUND = -32601
CODE_INVALID_PARAMS = -32602
CODE_REQUEST_CANCELLED = -32800

RequestId = Union[int, str]


@dataclass(frozen=True)
class Request:
    id: RequestId
    method: str
    params: Any


@dataclass(frozen=True)
class Notification:
    method: str
    params: Any


@dataclass(frozen=True)
class Response:
    id: RequestId | None
    result: Any
    error: Any  # None when the response is a success

    @property
    def is_error(self) -> bool:
        return self.error is not None


@dataclass(frozen=True)
class Malformed:
    """An inbound body that is not a usable message. ``id`` is set when the body was a request
    whose id could be recovered (so it can be answered with an error)."""

    reason: str
    id: RequestId | None = None


Message = Union[Request, Notification, Response, Malformed]


def _usable_id(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))


def _salvage_request_id(body: bytes) -> RequestId | None:
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, dict) and isinstance(obj.get("method"), str) and _usable_id(obj.get("id")):
        rid: RequestId = obj["id"]
        return rid
    return None


def parse_message(body: bytes) -> Message:
    """Classify one inbound body. Never raises for bad input: returns :class:`Malformed`."""
    try:
        obj = _json.decode(body)
    except _json.JSONDecodeFailure as e:
        return Malformed(f"invalid JSON: {e}", _salvage_request_id(body))
    if not isinstance(obj, dict):
        return Malformed(f"message is a JSON {type(obj).__name__}, not an object")
    method = obj.get("method")
    if "method" in obj:
        if not isinstance(method, str):
            return Malformed("method is not a string")
        if "id" not in obj or obj["id"] is None:
            return Notification(method, obj.get("params"))
        if not _usable_id(obj["id"]):
            return Malformed("unusable request id")
        return Request(obj["id"], method, obj.get("params"))
    if "result" in obj or "error" in obj:
        rid = obj.get("id")
        if rid is not None and not _usable_id(rid):
            return Malformed("unusable response id")
        error = obj.get("error")
        if error is None and "result" not in obj:
            return Malformed("response has a null error and no result")
        return Response(rid, obj.get("result"), error)
    return Malformed("neither a request nor a response")


# ---------------------------------------------------------------------------------------------
# building


def _id_text(rid: RequestId | None) -> bytes:
    return _json.encode(rid)


def _envelope(parts: Sequence[bytes]) -> bytes:
    body = b"".join(parts)
    if len(body) > INBOUND_MESSAGE_CAP:
        raise RequestTooLarge(
            f"message body of {len(body)} bytes exceeds the daemon's {INBOUND_MESSAGE_CAP}-byte inbound cap"
        )
    return body


def _params(params: Any, room: int) -> bytes:
    try:
        return _json.encode(params, limit=room)
    except _json.ValueTooLarge:
        raise RequestTooLarge(
            f"request params exceed the daemon's {INBOUND_MESSAGE_CAP}-byte inbound message cap"
        ) from None


def build_request(rid: RequestId, method: str, params: Any = None) -> bytes:
    """A request body. Raises :class:`~coderun._json.LossyValueError` for params that are not
    lossless JSON and :class:`RequestTooLarge` above the cap."""
    head = b'{"jsonrpc":"2.0","id":' + _id_text(rid) + b',"method":' + _json.encode(method)
    if params is None:
        return _envelope([head, b"}"])
    return _envelope([head, b',"params":', _params(params, INBOUND_MESSAGE_CAP - len(head) - 12), b"}"])


def build_notification(method: str, params: Any = None) -> bytes:
    head = b'{"jsonrpc":"2.0","method":' + _json.encode(method)
    if params is None:
        return _envelope([head, b"}"])
    return _envelope([head, b',"params":', _params(params, INBOUND_MESSAGE_CAP - len(head) - 12), b"}"])


def build_result_response(rid: RequestId, result: Any) -> bytes:
    """A success response; raises LossyValueError / ValueTooLarge for an unsendable result."""
    head = b'{"jsonrpc":"2.0","id":' + _id_text(rid) + b',"result":'
    value = _json.encode(result, limit=INBOUND_MESSAGE_CAP - len(head) - 1)
    return head + value + b"}"


def _cut(message: str, keep: int) -> str:
    return message[: max(0, keep)] + TRUNCATION_MARKER


def build_error_response(rid: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """An error response. A message too long for the cap is cut and ends with ``… [truncated]``;
    ``data`` that is not lossless JSON (or too large) is dropped."""
    head = b'{"jsonrpc":"2.0","id":' + _id_text(rid) + b',"error":{"code":' + _json.encode(code)
    tail = b""
    if data is not None:
        try:
            tail = b',"data":' + _json.encode(data, limit=1 << 20)
        except ValueError:
            tail = b""
    room = INBOUND_MESSAGE_CAP - len(head) - len(tail) - 16
    text = _encode_message(message, room)
    return head + b',"message":' + text + tail + b"}}"


def _message_bytes(message: str) -> bytes:
    try:
        text = _json.encode_str(message)
    except _json.LossyValueError:  # a surrogate pair: escape each half
        text = json.dumps(message)
    return text.encode("utf-8")


def _encode_message(message: str, room: int) -> bytes:
    if len(message) > room:  # every character takes at least one byte
        message = _cut(message, room - 64)
    while True:
        data = _message_bytes(message)
        if len(data) <= room:
            return data
        keep = int(len(message) * room / len(data) * 0.95) - 16
        if keep <= 0:
            return _message_bytes(TRUNCATION_MARKER)
        message = _cut(message, keep)


def build_binding_response(rid: RequestId, outcome: Callable[[], Any]) -> bytes:
    """The response to a ``binding/call``: the value returned by ``outcome()``, or an error.

    * ``outcome()`` raises → error -32000 with ``str(exception)`` as the message;
    * its value is not lossless JSON → error whose message starts
      ``binding resolution must be lossless JSON``;
    * the response would exceed the daemon's inbound cap → error naming the cap.
    """
    try:
        value = outcome()
    except Exception as e:  # noqa: BLE001 - every binding failure becomes an error response
        return build_error_response(rid, CODE_BINDING_FAILED, str(e), {"type": builtin_type_name(e)})
    return response_for_value(rid, value)


def builtin_type_name(e: BaseException) -> str:
    """The name of the nearest built-in class of ``e``'s type (``error.data.type`` of a failed
    binding call): the daemon raises the built-in type it names in the program."""
    for cls in type(e).__mro__:
        if cls.__module__ == "builtins":
            return cls.__name__
    return "Exception"


def response_for_value(rid: RequestId, value: Any) -> bytes:
    """Success response for a binding's value, or the lossless / cap error response."""
    try:
        return build_result_response(rid, value)
    except _json.LossyValueError as e:
        return build_error_response(rid, CODE_BINDING_FAILED, f"{LOSSLESS_PREFIX}: {e}")
    except _json.ValueTooLarge:
        return build_error_response(rid, CODE_BINDING_FAILED, CAP_MESSAGE)
    except RecursionError:  # a pathological container (e.g. a __len__ that recurses)
        return build_error_response(rid, CODE_BINDING_FAILED, f"{LOSSLESS_PREFIX}: value could not be walked")


Declared = Union[str, Sequence[Union[str, Mapping[str, Any]]]]
"""What one namespace declares: its ``functions`` entries, or (a str) the key of the configured MCP
server it binds."""


def build_run_params(
    program: str,
    bindings: Mapping[str, Declared],
    error_classes: Mapping[str, tuple[str, str]],
    limits: Mapping[str, Any] | None,
    stream: bool,
    files: Sequence[Mapping[str, str]] = (),
    session_id: str | None = None,
) -> dict[str, Any]:
    """The ``run`` params for already-validated arguments (namespace order is kept); a
    ``functions`` entry is a name or a typed declaration ``{"name", …}``, and a namespace
    declared as a str is an ``mcp`` binding of that server; ``files`` are
    ``run.files`` entries (``coderun._outputs.build_files``); ``session_id`` runs it in that
    session."""
    params: dict[str, Any] = {"program": program, **build_describe_params(bindings, error_classes, limits)}
    if stream:
        params["stream"] = True
    if files:
        params["files"] = [dict(f) for f in files]
    if session_id is not None:
        params["sessionId"] = session_id
    return params


def build_describe_params(
    bindings: Mapping[str, Declared],
    error_classes: Mapping[str, tuple[str, str]],
    limits: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The ``bindings/describe`` params: the bindings and limits exactly as a run declares them."""
    decl: list[dict[str, Any]] = []
    for ns, functions in bindings.items():
        entry: dict[str, Any] = {"global": ns}
        if isinstance(functions, str):
            entry["mcp"] = functions
        else:
            entry["functions"] = list(functions)
        if ns in error_classes:
            name, prop = error_classes[ns]
            entry["errorClass"] = {"name": name, "memberNameProperty": prop}
        decl.append(entry)
    params: dict[str, Any] = {"bindings": decl}
    if limits is not None:
        params["limits"] = dict(limits)
    return params
