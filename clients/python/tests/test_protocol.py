"""Unit tests of JSON-RPC message building/parsing, typed errors and result parsing (I/O-free)."""

from __future__ import annotations

import json
import math

import pytest

from coderun import errors
from coderun import protocol as P
from coderun.types import RunError, parse_run_result

CAP = 67108864


def test_parse_request_notification_response() -> None:
    req = P.parse_message(b'{"jsonrpc":"2.0","id":7,"method":"binding/call","params":{"runId":1}}')
    assert req == P.Request(7, "binding/call", {"runId": 1})
    note = P.parse_message(b'{"jsonrpc":"2.0","method":"run/log","params":{"index":0}}')
    assert note == P.Notification("run/log", {"index": 0})
    ok = P.parse_message(b'{"jsonrpc":"2.0","id":"a","result":null}')
    assert isinstance(ok, P.Response) and ok.id == "a" and ok.result is None and not ok.is_error
    err = P.parse_message(b'{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"m"}}')
    assert isinstance(err, P.Response) and err.is_error and err.error["code"] == -32602


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"[1]", "JSON list"),
        (b"3", "JSON int"),
        (b'{"jsonrpc":"2.0","method":5}', "method is not a string"),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', "unusable request id"),
        (b'{"jsonrpc":"2.0"}', "neither a request nor a response"),
        (b"{not json", "invalid JSON"),
    ],
)
def test_parse_malformed(body: bytes, reason: str) -> None:
    msg = P.parse_message(body)
    assert isinstance(msg, P.Malformed)
    assert reason in msg.reason
    assert msg.id is None


def test_duplicate_key_in_request_is_malformed_but_answerable() -> None:
    body = b'{"jsonrpc":"2.0","id":9,"method":"binding/call","params":{"args":{"a":1,"a":2}}}'
    msg = P.parse_message(body)
    assert isinstance(msg, P.Malformed)
    assert "duplicate object key" in msg.reason
    assert msg.id == 9


def test_build_request_and_notification() -> None:
    assert json.loads(P.build_request(1, "run", {"program": "return 1"})) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "run",
        "params": {"program": "return 1"},
    }
    assert json.loads(P.build_request(2, "shutdown")) == {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}
    assert json.loads(P.build_notification("$/cancelRequest", {"id": 4})) == {
        "jsonrpc": "2.0",
        "method": "$/cancelRequest",
        "params": {"id": 4},
    }


def test_build_request_refuses_lossy_and_oversized_params() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        P.build_request(1, "run", {"limits": {"maxWallMs": math.inf}})
    with pytest.raises(errors.RequestTooLarge, match="67108864"):
        P.build_request(1, "run", {"program": "x" * CAP})


def test_binding_response_success() -> None:
    body = P.build_binding_response(5, lambda: {"hits": [1, 2]})
    assert json.loads(body) == {"jsonrpc": "2.0", "id": 5, "result": {"hits": [1, 2]}}
    assert json.loads(P.build_binding_response(5, lambda: None))["result"] is None


def test_binding_response_exception() -> None:
    def boom() -> None:
        raise ValueError("no such document")

    msg = json.loads(P.build_binding_response("x", boom))
    assert msg["id"] == "x"
    assert msg["error"]["code"] == -32000
    assert msg["error"]["message"] == "no such document"
    assert msg["error"]["data"] == {"type": "ValueError"}


@pytest.mark.parametrize("value", [math.nan, math.inf, -0.0, 2**53 + 1, {1: 2}, {1, 2}, object(), {"a": [-0.0]}])
def test_binding_response_lossy(value: object) -> None:
    msg = json.loads(P.build_binding_response(1, lambda: value))
    assert "result" not in msg
    assert msg["error"]["message"].startswith("binding resolution must be lossless JSON")


def test_binding_response_over_the_cap() -> None:
    body = P.build_binding_response(1, lambda: "x" * CAP)
    msg = json.loads(body)
    assert "result" not in msg
    assert "67108864" in msg["error"]["message"]
    # just under the cap is fine
    room = CAP - len(b'{"jsonrpc":"2.0","id":1,"result":""}')
    body = P.build_binding_response(1, lambda: "y" * room)
    assert len(body) == CAP
    assert body.startswith(b'{"jsonrpc":"2.0","id":1,"result":"yyy') and body.endswith(b'yyy"}')


def test_error_message_is_cut_to_fit_the_cap() -> None:
    body = P.build_error_response(1, -32000, "x" * (CAP + 10))
    assert CAP - 100 < len(body) <= CAP
    assert body.startswith(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"xxx')
    assert body.endswith('x… [truncated]"}}'.encode())
    # the cut loop, on a small room: escaped characters take 6 bytes each
    assert len(P._encode_message("\x01" * 10_000, 20)) <= 20
    for room in (1000, 5000, 50_000):
        text = P._encode_message("\x01" * 100_000, room)
        assert room * 0.8 < len(text) <= room
        assert json.loads(text).endswith("… [truncated]")
    assert P._encode_message("short", 100) == b'"short"'


def test_error_message_with_surrogates() -> None:
    body = P.build_error_response(1, -32000, "bad \ud800 and \ud83d\ude00")
    # a diagnostic, not a value: the lone surrogate survives, a surrogate pair folds
    assert json.loads(body)["error"]["message"] == "bad \ud800 and \U0001f600"


@pytest.mark.parametrize(
    "code, cls",
    [
        (-32700, errors.ParseError),
        (-32600, errors.InvalidRequest),
        (-32601, errors.MethodNotFound),
        (-32602, errors.InvalidParams),
        (-32001, errors.QueueFull),
        (-32002, errors.NotInitialized),
        (-32099, errors.RpcError),
    ],
)
def test_error_from_response(code: int, cls: type[errors.RpcError]) -> None:
    e = errors.error_from_response({"code": code, "message": "msg", "data": 1})
    assert type(e) is cls
    assert e.code == code and e.message == "msg" and e.data == 1
    assert isinstance(e, errors.CodeRunError)
    assert "msg" in str(e) and str(code) in str(e)


def test_error_from_malformed_error_object() -> None:
    assert errors.error_from_response("nope").code == 0
    assert errors.error_from_response({"code": -32602}).message == "None"


def test_parse_run_result_success() -> None:
    r = parse_run_result(
        {
            "value": {"a": 1},
            "logs": ["x"],
            "stats": {"wallMs": 5, "cpuMs": 3, "maxRssKb": 9000, "queueMs": 0, "bindingCalls": 2, "logBytes": 2},
        }
    )
    assert r.ok and r.has_value and r.value == {"a": 1} and r.logs == ["x"]
    assert r.stats.wall_ms == 5 and r.stats.binding_calls == 2 and r.stats.max_rss_kb == 9000


def test_parse_run_result_null_value_is_a_value() -> None:
    r = parse_run_result({"value": None, "logs": [], "stats": {}})
    assert r.ok and r.has_value and r.value is None


def test_parse_run_result_failure() -> None:
    r = parse_run_result(
        {
            "logs": [],
            "error": {
                "kind": "exception",
                "message": "Traceback ...",
                "exceptionType": "ZeroDivisionError",
                "line": 2,
            },
            "stats": {},
        }
    )
    assert not r.ok and not r.has_value
    assert r.error == RunError("exception", "Traceback ...", exception_type="ZeroDivisionError", line=2)
    r = parse_run_result(
        {"logs": [], "error": {"kind": "worker-exit", "message": "m", "exitCode": 3, "signal": "SIGKILL"}}
    )
    assert r.error is not None and r.error.exit_code == 3 and r.error.signal == "SIGKILL"
    r = parse_run_result({"logs": [], "error": {"kind": "timeout", "message": "m", "budget": "cpu"}})
    assert r.error is not None and r.error.budget == "cpu"


def test_parse_run_result_rejects_non_object() -> None:
    with pytest.raises(ValueError):
        parse_run_result([1])


def test_build_run_params() -> None:
    params = P.build_run_params(
        "return 1",
        {"tools": ["search", "my-tool"], "db": []},
        {"tools": ("ToolError", "tool")},
        {"maxWallMs": 5000},
        True,
    )
    assert params == {
        "program": "return 1",
        "bindings": [
            {
                "global": "tools",
                "functions": ["search", "my-tool"],
                "errorClass": {"name": "ToolError", "memberNameProperty": "tool"},
            },
            {"global": "db", "functions": []},
        ],
        "limits": {"maxWallMs": 5000},
        "stream": True,
    }
    assert "stream" not in P.build_run_params("", {}, {}, None, False)
