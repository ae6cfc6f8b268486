"""Unit tests of the LSP framing parser/encoder (I/O-free)."""

from __future__ import annotations

import pytest

from coderun._framing import FrameParser, FramingError, encode_frame, frame_header


def test_encode_frame() -> None:
    assert encode_frame(b'{"a":1}') == b'Content-Length: 7\r\n\r\n{"a":1}'
    assert frame_header(0) == b"Content-Length: 0\r\n\r\n"


def test_parse_one_and_many() -> None:
    p = FrameParser()
    assert p.feed(encode_frame(b"abc")) == [b"abc"]
    assert p.feed(encode_frame(b"x") + encode_frame(b"") + encode_frame(b"yz")) == [b"x", b"", b"yz"]
    assert p.buffered == 0


def test_parse_byte_by_byte() -> None:
    p = FrameParser()
    data = encode_frame("héllo".encode()) + encode_frame(b"[1]")
    out: list[bytes] = []
    for i in range(len(data)):
        out += p.feed(data[i : i + 1])
    assert out == ["héllo".encode(), b"[1]"]


def test_headers_case_insensitive_and_extra_headers_ignored() -> None:
    p = FrameParser()
    data = b"content-type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH:  2 \r\nX-Other: 1\r\n\r\n{}"
    assert p.feed(data) == [b"{}"]


@pytest.mark.parametrize(
    "block, what",
    [
        (b"Content-Type: x\r\n\r\n", "missing Content-Length"),
        (b"Content-Length: 1x\r\n\r\n", "not a decimal number"),
        (b"Content-Length: -1\r\n\r\n", "not a decimal number"),
        (b"Content-Length: 1\nX: y\r\n\r\n", "CRLF"),
        (b"garbage\r\n\r\n", "malformed header line"),
    ],
)
def test_bad_header_blocks(block: bytes, what: str) -> None:
    with pytest.raises(FramingError, match=what):
        FrameParser().feed(block)


def test_header_block_too_long() -> None:
    p = FrameParser()
    with pytest.raises(FramingError, match="longer than 4096"):
        p.feed(b"X-Pad: " + b"a" * 5000)


def test_max_body() -> None:
    p = FrameParser(max_body=10)
    assert p.feed(encode_frame(b"0123456789")) == [b"0123456789"]
    with pytest.raises(FramingError, match="exceeds"):
        p.feed(frame_header(11))


def test_partial_body_waits() -> None:
    p = FrameParser()
    assert p.feed(frame_header(4) + b"ab") == []
    assert p.buffered == 2
    assert p.feed(b"cd" + frame_header(1)) == [b"abcd"]
    assert p.feed(b"z") == [b"z"]
