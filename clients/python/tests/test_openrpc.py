"""The client's wire types against the daemon's OpenRPC description (docs/openrpc.json,
generated from the tables the daemon validates and dispatches with)."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any

from coderun import protocol, types

DOC = json.loads((Path(__file__).resolve().parents[3] / "docs" / "openrpc.json").read_text())
SCHEMAS: dict[str, Any] = DOC["components"]["schemas"]


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def fields(cls: type) -> set[str]:
    return {camel(f.name) for f in dataclasses.fields(cls) if f.name != "raw"}


def method(name: str, sender: str) -> dict[str, Any]:
    (m,) = [m for m in DOC["methods"] if m["name"] == name and m["x-from"] in (sender, "either")]
    found: dict[str, Any] = m
    return found


def test_limits_are_documented_limits() -> None:
    documented = set(SCHEMAS["Limits"]["properties"])
    assert set(typing.get_type_hints(types.Limits)) <= documented


def test_secret_members() -> None:
    schema = SCHEMAS["Secret"]
    assert set(typing.get_type_hints(types.Secret)) == set(schema["properties"])
    assert types.Secret.__required_keys__ == set(schema["required"])


def test_error_kinds() -> None:
    assert set(typing.get_args(types.ErrorKind)) == set(SCHEMAS["RunError"]["properties"]["kind"]["enum"])


def test_run_error_members() -> None:
    assert fields(types.RunError) == set(SCHEMAS["RunError"]["properties"])


def test_stats_members() -> None:
    assert fields(types.RunStats) == set(SCHEMAS["Stats"]["properties"])


def test_session_info_members() -> None:
    assert fields(types.SessionInfo) == set(SCHEMAS["SessionInfo"]["properties"])


def test_result_members() -> None:
    documented = set(SCHEMAS["RunResult"]["properties"])
    assert fields(types.RunResult) - {"hasValue"} == documented


def test_notifications() -> None:
    for cls, name in ((types.SessionClosed, "session/closed"), (types.LogEvent, "run/log")):
        assert fields(cls) == {p["name"] for p in method(name, "daemon")["params"]}, name


def test_every_method_the_client_knows_is_documented() -> None:
    known = {v for k, v in vars(protocol).items() if k.startswith("METHOD_")}
    documented = {m["name"] for m in DOC["methods"]}
    assert known <= documented, known - documented
    assert documented - known <= {"rpc.discover"}, documented - known
