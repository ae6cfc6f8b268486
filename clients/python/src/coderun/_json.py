"""Strict, lossless JSON for the wire (I/O-free).

Encoding (:func:`encode`) accepts exactly the values that travel as JSON without change:
``None``, ``bool``, ``str``, ``int`` a double holds exactly, finite ``float`` other than
``-0.0`` (spelt as the daemon spells numbers), ``list``/``tuple`` (as arrays) and ``dict`` with ``str`` keys, nested to any depth.
Anything else — NaN, infinities, negative zero, inexact integers, non-``str`` keys, sets,
bytes, arbitrary objects, cycles — raises :class:`LossyValueError` naming the fault and where
it is. The encoder is iterative (no recursion limit) and can stop early at a byte limit
(:class:`ValueTooLarge`).

Decoding (:func:`decode`) is strict: UTF-8 only, duplicate member names rejected, ``NaN`` /
``Infinity`` / numbers that overflow a double rejected. Deeply nested input falls back to an
iterative parser, so depth never raises :class:`RecursionError`.
"""

from __future__ import annotations

import json
import json.decoder
import json.encoder
import math
import re
from typing import Any, Callable, Iterator, Union

__all__ = ["LossyValueError", "ValueTooLarge", "JSONDecodeFailure", "encode", "decode"]

_MAX_SAFE = 2**53
_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_encode_basestring: Callable[[str], str] = json.encoder.encode_basestring


class LossyValueError(ValueError):
    """A value that cannot travel as lossless JSON."""

    def __init__(self, reason: str, path: str = "$") -> None:
        super().__init__(f"{reason} at {path}")
        self.reason = reason
        self.path = path


class ValueTooLarge(ValueError):
    """The encoded value would exceed the byte limit given to :func:`encode`."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        what = "more than" if size is None else f"{size} bytes,"
        super().__init__(f"encoded JSON is {what} {limit} bytes")
        self.limit = limit
        self.size = size


class JSONDecodeFailure(ValueError):
    """Inbound text that is not strict JSON."""


# ---------------------------------------------------------------------------------------------
# encoding


def _escape_surrogate(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def encode_str(s: str) -> str:
    """JSON string literal: non-ASCII raw, lone surrogates as ``\\udxxx`` escapes."""
    text: str = _encode_basestring(s)
    if text.isascii() or not _SURROGATE.search(text):
        return text
    if _PAIR.search(s):
        raise LossyValueError("string holds a surrogate pair that JSON would fold into one character")
    return _SURROGATE.sub(_escape_surrogate, text)


def _encode_int(v: int) -> str:
    if -_MAX_SAFE <= v <= _MAX_SAFE:
        return int.__repr__(v)
    try:
        exact = int(float(v)) == v
    except OverflowError:
        exact = False
    if not exact:
        raise LossyValueError(f"integer {int.__repr__(v)[:40]} is not exactly representable as a double")
    return int.__repr__(v)


def _encode_float(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        raise LossyValueError(f"non-finite float {float.__repr__(v)}")
    if v == 0.0 and math.copysign(1.0, v) < 0:
        raise LossyValueError("negative zero")
    if v.is_integer() and abs(v) < 1e21:
        return int.__repr__(int(v))
    sign = "-" if v < 0 else ""
    digits, n = _shortest_digits(abs(v))
    return sign + _ecma(digits, n)


def _shortest_digits(v: float) -> tuple[str, int]:
    """The shortest round-tripping digits of ``v > 0`` and the exponent ``n`` with
    ``v = 0.digits × 10**n``."""
    mantissa, _, exp = float.__repr__(v).partition("e")
    whole, _, frac = mantissa.partition(".")
    joined = whole + frac
    digits = joined.lstrip("0")
    n = len(whole) + int(exp or 0) - (len(joined) - len(digits))
    return digits.rstrip("0"), n


def _ecma(digits: str, n: int) -> str:
    """ECMAScript Number::toString of a non-integral value or one of at least 10**21: the
    daemon's canonical spelling (docs/child-protocol.md §2.7), so that what the client writes
    reads the same as what the daemon writes."""
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def _scalar(v: object) -> str | None:
    """The JSON text of a scalar, or None for a container."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return encode_str(v)
    if isinstance(v, int):
        return _encode_int(v)
    if isinstance(v, float):
        return _encode_float(v)
    if isinstance(v, (list, tuple, dict)):
        return None
    raise LossyValueError(f"value of type {type(v).__name__} is not JSON")


class _Frame:
    __slots__ = ("obj", "it", "count", "key", "is_dict")

    def __init__(self, obj: Any, is_dict: bool) -> None:
        self.obj = obj
        self.is_dict = is_dict
        self.it: Iterator[Any] = iter(obj.items()) if is_dict else iter(obj)
        self.count = 0
        self.key: object = None


def _path(stack: list[_Frame]) -> str:
    parts = ["$"]
    for fr in stack:
        if fr.is_dict:
            key = fr.key if isinstance(fr.key, str) else repr(fr.key)
            parts.append("[" + json.dumps(key[:80], ensure_ascii=False) + "]")
        else:
            parts.append(f"[{fr.count - 1}]")
    return "".join(parts)


_END = object()


class _Encoder:
    def __init__(self, limit: int | None) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.limit = limit
        self.stack: list[_Frame] = []
        self.active: set[int] = set()

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.limit is not None and self.size > self.limit:
            raise ValueTooLarge(self.limit)

    def open(self, v: Any) -> None:
        if id(v) in self.active:
            raise LossyValueError("cycle (a container holds itself)")
        is_dict = isinstance(v, dict)
        if not v:
            self.put("{}" if is_dict else "[]")
            return
        self.put("{" if is_dict else "[")
        self.active.add(id(v))
        self.stack.append(_Frame(v, is_dict))

    def next_value(self) -> tuple[bool, Any]:
        """Advance to the next member value; (False, None) when the whole value is done."""
        while self.stack:
            fr = self.stack[-1]
            item: Any = next(fr.it, _END)
            if item is _END:
                self.put("}" if fr.is_dict else "]")
                self.active.discard(id(fr.obj))
                self.stack.pop()
                continue
            if fr.count:
                self.put(",")
            fr.count += 1
            if not fr.is_dict:
                return True, item
            key, val = item
            fr.key = key
            if not isinstance(key, str):
                raise LossyValueError(f"object key of type {type(key).__name__} (keys must be str)")
            self.put(encode_str(key))
            self.put(":")
            return True, val
        return False, None

    def run(self, value: Any) -> str:
        try:
            more = True
            while more:
                text = _scalar(value)
                if text is None:
                    self.open(value)
                else:
                    self.put(text)
                more, value = self.next_value()
        except LossyValueError as e:
            raise LossyValueError(e.reason, _path(self.stack)) from None
        return "".join(self.parts)


def encode(value: Any, *, limit: int | None = None) -> bytes:
    """Compact, lossless UTF-8 JSON for ``value``.

    Raises :class:`LossyValueError` for a value that would not arrive unchanged, and
    :class:`ValueTooLarge` when ``limit`` is given and the result would be longer.
    """
    data = _Encoder(limit).run(value).encode("utf-8")
    if limit is not None and len(data) > limit:
        raise ValueTooLarge(limit, len(data))
    return data


# ---------------------------------------------------------------------------------------------
# decoding


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise JSONDecodeFailure(f"duplicate object key {json.dumps(k[:80], ensure_ascii=False)}")
        out[k] = v
    return out


def _reject_constant(name: str) -> Any:
    raise JSONDecodeFailure(f"{name} is not JSON")


def _parse_float(text: str) -> float:
    v = float(text)
    if math.isinf(v):
        raise JSONDecodeFailure(f"number {text[:40]} overflows a double")
    return v


def decode(data: Union[bytes, bytearray, memoryview, str]) -> Any:
    """Parse strict JSON text (bytes must be UTF-8)."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise JSONDecodeFailure(f"invalid UTF-8 at byte {e.start}") from None
    try:
        return json.loads(
            text, object_pairs_hook=_pairs_hook, parse_constant=_reject_constant, parse_float=_parse_float
        )
    except RecursionError:
        return _decode_deep(text)
    except json.JSONDecodeError as e:
        raise JSONDecodeFailure(str(e)) from None


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}


class _DeepDecoder:
    """Iterative strict JSON parser, used when the C scanner hits the recursion limit."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.stack: list[list[Any]] = []  # [is_object, items, pending_key]

    def fail(self, what: str) -> JSONDecodeFailure:
        return JSONDecodeFailure(f"{what} at char {self.i}")

    def ws(self) -> None:
        m = _WS.match(self.s, self.i)
        self.i = m.end() if m else self.i

    def peek(self) -> str:
        return self.s[self.i : self.i + 1]

    def string(self) -> str:
        if self.peek() != '"':
            raise self.fail("expected string")
        try:
            value, self.i = _scanstring(self.s, self.i + 1, True)
        except json.JSONDecodeError as e:
            raise JSONDecodeFailure(str(e)) from None
        return value

    def key(self) -> str:
        k = self.string()
        self.ws()
        if self.peek() != ":":
            raise self.fail("expected ':'")
        self.i += 1
        self.ws()
        return k

    def scalar(self) -> Any:
        c = self.peek()
        if c == '"':
            return self.string()
        m = _NUMBER.match(self.s, self.i)
        if m:
            self.i = m.end()
            if m.group(2) or m.group(3):
                return _parse_float(m.group())
            return int(m.group())
        for word, val in _LITERALS.items():
            if self.s.startswith(word, self.i):
                self.i += len(word)
                return val
        raise self.fail("expected value")

    def open(self) -> tuple[bool, Any]:
        """At a value: push a non-empty container (True) or return a complete value."""
        c = self.peek()
        if c not in ("[", "{"):
            return False, self.scalar()
        self.i += 1
        self.ws()
        close = "]" if c == "[" else "}"
        if self.peek() == close:
            self.i += 1
            return False, [] if c == "[" else {}
        key = self.key() if c == "{" else None
        self.stack.append([c == "{", [], key])
        return True, None

    def attach(self, value: Any) -> tuple[bool, Any]:
        """Add a finished value to its parent; (True, None) = parse the next member."""
        while self.stack:
            self.ws()
            is_obj, items, key = self.stack[-1]
            items.append((key, value) if is_obj else value)
            c = self.peek()
            self.i += 1
            if c == ",":
                self.ws()
                if is_obj:
                    self.stack[-1][2] = self.key()
                return True, None
            if c != ("}" if is_obj else "]"):
                self.i -= 1
                raise self.fail("expected ',' or close")
            self.stack.pop()
            value = _pairs_hook(items) if is_obj else items
        return False, value

    def run(self) -> Any:
        self.ws()
        while True:
            pushed, value = self.open()
            if pushed:
                continue
            more, value = self.attach(value)
            if not more:
                break
        self.ws()
        if self.i != len(self.s):
            raise self.fail("extra data")
        return value


def _decode_deep(text: str) -> Any:
    return _DeepDecoder(text).run()
