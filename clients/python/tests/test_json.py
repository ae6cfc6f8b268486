"""Unit tests of the strict, lossless JSON codec (I/O-free)."""

from __future__ import annotations

import json
import math

import pytest

from coderun import _json
from coderun._json import JSONDecodeFailure, LossyValueError, ValueTooLarge, decode, encode


@pytest.mark.parametrize(
    "value, text",
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-7, "-7"),
        (2**53, "9007199254740992"),
        (2**60, "1152921504606846976"),
        (-(2**64), "-18446744073709551616"),
        (1.5, "1.5"),
        (0.0, "0"),  # the daemon's canonical spelling (docs/child-protocol.md §2.7)
        (2.0**60, "1152921504606846976"),
        (1.5e-7, "1.5e-7"),
        (0.00001, "0.00001"),
        (-1e100, "-1e+100"),
        (1e21, "1e+21"),
        (123456.789, "123456.789"),
        (5e-324, "5e-324"),
        ("", '""'),
        ('a"b\\', '"a\\"b\\\\"'),
        ("é中😀", '"é中😀"'),
        ("\n\t\x00", '"\\n\\t\\u0000"'),
        ("\ud800", '"\\ud800"'),
        ("x\udfffy", '"x\\udfffy"'),
        ([], "[]"),
        ({}, "{}"),
        ((1, 2), "[1,2]"),
        ({"a": [1, {"b": None}], "c": "d"}, '{"a":[1,{"b":null}],"c":"d"}'),
    ],
)
def test_encode_lossless_values(value: object, text: str) -> None:
    assert encode(value).decode("utf-8") == text


def test_encoded_floats_round_trip() -> None:
    for f in (1e-7, 1e21, 5e-324, 1.7976931348623157e308, -2.5e-8, 0.1):
        assert json.loads(encode(f)) == f


@pytest.mark.parametrize(
    "value, reason",
    [
        (math.nan, "non-finite float nan"),
        (math.inf, "non-finite float inf"),
        (-math.inf, "non-finite float -inf"),
        (-0.0, "negative zero"),
        (2**53 + 1, "is not exactly representable as a double"),
        (-(2**53) - 1, "is not exactly representable as a double"),
        (2**1024, "is not exactly representable as a double"),
        ({1: "x"}, "object key of type int"),
        ({None: "x"}, "object key of type NoneType"),
        ({1, 2}, "value of type set is not JSON"),
        (b"bytes", "value of type bytes is not JSON"),
        (object(), "value of type object is not JSON"),
        ("\ud83d\ude00", "surrogate pair"),
    ],
)
def test_encode_rejects_lossy_values(value: object, reason: str) -> None:
    with pytest.raises(LossyValueError) as info:
        encode(value)
    assert reason in str(info.value)


def test_lossy_error_names_the_path() -> None:
    with pytest.raises(LossyValueError) as info:
        encode({"a": [1, 2, {"b": math.nan}]})
    assert info.value.path == '$["a"][2]["b"]'
    assert str(info.value) == 'non-finite float nan at $["a"][2]["b"]'


def test_encode_rejects_cycles() -> None:
    lst: list[object] = [1]
    lst.append(lst)
    with pytest.raises(LossyValueError, match="cycle"):
        encode(lst)
    d: dict[str, object] = {}
    d["self"] = {"inner": d}
    with pytest.raises(LossyValueError, match="cycle"):
        encode(d)


def test_shared_but_acyclic_containers_are_fine() -> None:
    shared = [1, 2]
    assert encode([shared, shared]) == b"[[1,2],[1,2]]"


def test_encode_deep_nesting_is_iterative() -> None:
    depth = 30_000
    value: object = "x"
    for _ in range(depth):
        value = [value]
    text = encode(value)
    assert text == b"[" * depth + b'"x"' + b"]" * depth
    back = decode(text)
    for _ in range(depth):
        assert isinstance(back, list)
        back = back[0]
    assert back == "x"


def test_encode_limit() -> None:
    assert encode("abc", limit=5) == b'"abc"'
    with pytest.raises(ValueTooLarge):
        encode("abcd", limit=5)
    with pytest.raises(ValueTooLarge):
        encode(["é" * 3], limit=8)  # 8 characters but 11 bytes


def test_subclasses_encode_as_their_json_value() -> None:
    import enum

    class Color(enum.IntEnum):
        RED = 1

    class S(str):
        pass

    assert encode({"c": Color.RED, "s": S("x")}) == b'{"c":1,"s":"x"}'


def test_decode_strict() -> None:
    assert decode(b'{"a": [1, 2.5, "\\ud800", null]}') == {"a": [1, 2.5, "\ud800", None]}
    cases: list[tuple[bytes, str | None]] = [
        (b'{"a": 1, "a": 2}', "duplicate object key"),
        (b"NaN", "NaN is not JSON"),
        (b"[Infinity]", "Infinity is not JSON"),
        (b"1e400", "overflows a double"),
        (b'"\xff"', "invalid UTF-8"),
        (b"[1,]", None),
        (b"", None),
    ]
    for bad, what in cases:
        with pytest.raises(JSONDecodeFailure, match=what):
            decode(bad)


DOCS = [
    '{"a": [1, -2, 3.5e2, true, false, null, "s\\u00e9\\n"], "b": {}, "c": []}',
    '  [ {"x" : {"y" : [ [ ] , { } ]}} , "\\ud83d\\ude00" , -0.5 , 0 ]  ',
    '"plain"',
    "12345678901234567890",
    "[1e-7, 1E+2, 0.000001]",
]


@pytest.mark.parametrize("doc", DOCS)
def test_deep_decoder_agrees_with_json(doc: str) -> None:
    assert _json._decode_deep(doc) == json.loads(doc)


@pytest.mark.parametrize(
    "doc", ['{"a": 1, "a": 2}', "[1 2]", '{"a" 1}', "[1,]", "tru", '{"a":1}x', "[NaN]", "[1e400]", "["]
)
def test_deep_decoder_rejects(doc: str) -> None:
    with pytest.raises(JSONDecodeFailure):
        _json._decode_deep(doc)


def test_deep_duplicate_key_rejected() -> None:
    depth = 20_000
    doc = '{"k":' * depth + '{"a":1,"a":2}' + "}" * depth
    with pytest.raises(JSONDecodeFailure, match="duplicate"):
        decode(doc)
