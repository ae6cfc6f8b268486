"""The model's text for a run result matches the shared golden cases (clients/testdata/model-text.json),
the same cases the daemon's MCP server is tested against."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from coderun import model_text
from coderun.types import parse_run_result

GOLDEN = Path(__file__).resolve().parents[2] / "testdata" / "model-text.json"
CASES: list[dict[str, Any]] = json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_model_text_matches_golden(case: dict[str, Any]) -> None:
    got = model_text(parse_run_result(case["result"]))
    assert got.text == case["text"]
    assert got.is_error == case["isError"]
    assert [(i.mime, base64.b64encode(i.data).decode()) for i in got.images] == \
        [(i["mime"], i["base64"]) for i in case["images"]]
