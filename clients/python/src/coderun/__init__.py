"""coderun — asyncio client for the coderun-rpc daemon.

>>> async with await Client.start() as client:
...     result = await client.run("return await tools.add({'a': 1, 'b': 2})",
...                               bindings={"tools": {"add": lambda a: a["a"] + a["b"]}})
...     result.value
3
"""

from ._json import LossyValueError
from ._locate import Host, find_daemon
from ._outputs import FileInput, Files, OutFile, Output, OutputEvent
from .client import BindingFunction, Bindings, Client, FunctionsBinding, LogCallback, McpBinding, OutputCallback, RunHandle
from .errors import (
    ClientClosed,
    CodeRunError,
    ConnectionLost,
    DaemonNotFound,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    NotInitialized,
    ParseError,
    ProtocolViolation,
    QueueFull,
    RequestTooLarge,
    RpcError,
    SessionLimitReached,
    SessionNotOpen,
)
from .modeltext import Image, ModelText, model_text
from .session import Session, SessionOpener
from .typed import Binding, binding
from .types import EgressEntry, EgressRule, Limits, Secret, LogEvent, RunError, RunResult, RunStats, SessionClosed, SessionInfo

__version__ = "0.1.0"

__all__ = [
    "Client",
    "RunHandle",
    "Session",
    "SessionOpener",
    "SessionInfo",
    "SessionClosed",
    "BindingFunction",
    "Bindings",
    "McpBinding",
    "FunctionsBinding",
    "Binding",
    "binding",
    "LogCallback",
    "OutputCallback",
    "Output",
    "OutputEvent",
    "OutFile",
    "Files",
    "FileInput",
    "find_daemon",
    "Host",
    "RunResult",
    "RunError",
    "RunStats",
    "LogEvent",
    "Limits",
    "EgressRule",
    "Secret",
    "EgressEntry",
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
    "LossyValueError",
    "model_text",
    "ModelText",
    "Image",
]
