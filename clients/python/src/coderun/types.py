"""Typed views of what the daemon returns (docs/protocol.md §3, §5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, TypedDict, Union

from ._outputs import OutFile, Output, parse_files, parse_outputs

__all__ = [
    "Limits",
    "EgressRule",
    "Secret",
    "EgressEntry",
    "RunError",
    "RunStats",
    "RunResult",
    "LogEvent",
    "ErrorKind",
    "SessionInfo",
    "SessionClosed",
    "parse_run_result",
]

ErrorKind = Literal["exception", "timeout", "abort", "worker-exit", "invalid-output", "output-limit"]


class Limits(TypedDict, total=False):
    """Per-run budgets; each may only tighten the daemon's configuration."""

    cpuSeconds: int
    maxWallMs: int
    addressSpaceMb: int
    maxLogBytes: int
    maxValueBytes: int
    maxFileBytes: int
    maxOutputBytes: int
    maxDiskMb: int
    maxEgressRequests: int
    maxEgressBytes: int


class _EgressRuleObject(TypedDict, total=False):
    host: str  # "host[:port]"; "*.example.com" matches its sub-domains
    ports: list[int]
    methods: list[str]  # plain HTTP only: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS
    private: bool


EgressRule = Union[str, _EgressRuleObject]
"""One entry of an egress policy (docs/containment.md §6): ``"host[:port]"`` or an object."""


class _SecretBase(TypedDict):
    hosts: list[str]  # host patterns within the run's egress, without ports
    value: str  # never seen by the program


class Secret(_SecretBase, total=False):
    """A credential the egress proxy adds to a run's requests to ``hosts``
    (docs/containment-secrets.md): exactly one of ``header``, ``query`` and ``env`` (a variable
    the program sees holding a placeholder, which the proxy replaces with ``value``)."""

    header: str
    query: str
    env: str


@dataclass(frozen=True)
class EgressEntry:
    """One request a run made through the daemon's egress proxy (``result.egress``)."""

    host: str
    port: int
    method: str  # the HTTP method, "CONNECT" for an HTTPS tunnel, "OTHER" for a refused odd one
    status: int  # 403: refused by the policy or a budget
    bytes: int  # the response body's, or a tunnel's both ways
    ms: int


@dataclass(frozen=True)
class RunError:
    """A classified failure (``result.error``). Optional fields are ``None`` when absent."""

    kind: str
    message: str
    exception_type: str | None = None  # "exceptionType", kind exception
    line: int | None = None  # kind exception: innermost program line, 1-based
    budget: str | None = None  # kind timeout: "cpu" | "wall"
    exit_code: int | None = None  # "exitCode", kind worker-exit
    signal: str | None = None  # kind worker-exit, e.g. "SIGKILL"
    path: str | None = None  # kind invalid-output: JSON path of the first refused value, e.g. '$["rows"][3]'
    hint: str | None = None  # kind invalid-output: how to return that value instead, when one applies
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class RunStats:
    wall_ms: int = 0
    cpu_ms: int = 0
    max_rss_kb: int = 0
    queue_ms: int = 0
    binding_calls: int = 0
    log_bytes: int = 0
    install_ms: int | None = None  # the run's packages' install (or cache lookup) time; None: none asked


@dataclass(frozen=True)
class SessionInfo:
    """``result.session`` of a run made in a session."""

    id: str
    alive: bool  # False: this run ended the session (``reason`` says why)
    runs: int  # runs the session has settled, this one included
    reason: str | None = None


@dataclass(frozen=True)
class SessionClosed:
    """A ``session/closed`` notification: the daemon ended a session on its own."""

    session_id: str
    reason: str  # "idle" | "lost" | "shutdown"
    message: str


@dataclass(frozen=True)
class RunResult:
    """The ``run`` response. ``value`` is meaningful only when ``has_value`` is true;
    ``session`` is set for a run made in a session."""

    value: Any
    has_value: bool
    logs: list[str]
    error: RunError | None
    stats: RunStats
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    outputs: list[Output] = field(default_factory=list)
    """Displayed objects, in order (the last may be the truncation marker)."""
    files: list[OutFile] = field(default_factory=list)
    """Regular files left under ``out/``, sorted by path."""
    session: SessionInfo | None = None
    egress: list[EgressEntry] | None = None
    """Requests made through the egress proxy; ``None`` when the daemon has no egress policy."""

    @property
    def ok(self) -> bool:
        """True when the program completed (no ``error``)."""
        return self.error is None

    def save_files(self, directory: Any) -> list[Any]:
        """Write every returned (not omitted) file under ``directory``; returns the paths."""
        return [f.save(directory) for f in self.files if not f.omitted]


@dataclass(frozen=True)
class LogEvent:
    """One ``run/log`` notification: ``continued`` means ``text`` extends entry ``index``."""

    run_id: int | str
    index: int
    text: str
    continued: bool


def _opt(d: Mapping[str, Any], key: str, typ: type) -> Any:
    v = d.get(key)
    if isinstance(v, typ) and not (typ is int and isinstance(v, bool)):
        return v
    return None


def _int(d: Mapping[str, Any], key: str) -> int:
    v = _opt(d, key, int)
    return v if v is not None else 0


def _parse_error(e: Any) -> RunError | None:
    if not isinstance(e, dict):
        return None
    kind = e.get("kind")
    message = e.get("message")
    return RunError(
        kind=kind if isinstance(kind, str) else "",
        message=message if isinstance(message, str) else "",
        exception_type=_opt(e, "exceptionType", str),
        line=_opt(e, "line", int),
        budget=_opt(e, "budget", str),
        exit_code=_opt(e, "exitCode", int),
        signal=_opt(e, "signal", str),
        path=_opt(e, "path", str),
        hint=_opt(e, "hint", str),
        raw=e,
    )


def _parse_stats(s: Any) -> RunStats:
    if not isinstance(s, dict):
        return RunStats()
    return RunStats(
        wall_ms=_int(s, "wallMs"),
        cpu_ms=_int(s, "cpuMs"),
        max_rss_kb=_int(s, "maxRssKb"),
        queue_ms=_int(s, "queueMs"),
        binding_calls=_int(s, "bindingCalls"),
        log_bytes=_int(s, "logBytes"),
        install_ms=_opt(s, "installMs", int),
    )


def _parse_session(s: Any) -> SessionInfo | None:
    if not isinstance(s, dict) or not isinstance(s.get("id"), str):
        return None
    return SessionInfo(id=s["id"], alive=s.get("alive") is not False, runs=_int(s, "runs"), reason=_opt(s, "reason", str))


def parse_run_result(result: Any) -> RunResult:
    """Build a :class:`RunResult` from the ``result`` of a ``run`` response.

    Raises ValueError when ``result`` is not an object.
    """
    if not isinstance(result, dict):
        raise ValueError(f"run result is not an object: {type(result).__name__}")
    logs = result.get("logs")
    error = _parse_error(result.get("error"))
    has_value = "value" in result and error is None
    return RunResult(
        value=result.get("value") if has_value else None,
        has_value=has_value,
        logs=[x for x in logs if isinstance(x, str)] if isinstance(logs, list) else [],
        error=error,
        stats=_parse_stats(result.get("stats")),
        raw=result,
        outputs=parse_outputs(result.get("outputs")),
        files=parse_files(result.get("files")),
        session=_parse_session(result.get("session")),
        egress=_parse_egress(result.get("egress")),
    )


def _parse_egress(v: Any) -> list[EgressEntry] | None:
    if not isinstance(v, list):
        return None
    return [
        EgressEntry(
            host=_opt(e, "host", str) or "",
            port=_int(e, "port"),
            method=_opt(e, "method", str) or "",
            status=_int(e, "status"),
            bytes=_int(e, "bytes"),
            ms=_int(e, "ms"),
        )
        for e in v
        if isinstance(e, dict)
    ]
