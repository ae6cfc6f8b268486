"""LSP base-protocol framing (I/O-free): ``Content-Length: N\\r\\n\\r\\n`` + N bytes of body."""

from __future__ import annotations

__all__ = ["FramingError", "FrameParser", "frame_header", "encode_frame", "HEADER_BLOCK_CAP"]

HEADER_BLOCK_CAP = 4096


class FramingError(Exception):
    """A header block that cannot be used; the stream cannot be resynchronised."""


def frame_header(body_length: int) -> bytes:
    """The header block for a body of ``body_length`` bytes."""
    return b"Content-Length: %d\r\n\r\n" % body_length


def encode_frame(body: bytes) -> bytes:
    """One complete frame."""
    return frame_header(len(body)) + body


def _content_length(block: bytes) -> int:
    length: int | None = None
    for line in block.split(b"\r\n"):
        if b"\n" in line or b"\r" in line:
            raise FramingError("header line does not end in CRLF")
        name, sep, value = line.partition(b":")
        if not sep:
            raise FramingError(f"malformed header line {line[:60]!r}")
        if name.strip().lower() != b"content-length":
            continue
        digits = value.strip(b" \t")
        if not digits.isdigit() or not digits.isascii():
            raise FramingError(f"Content-Length {digits[:40]!r} is not a decimal number")
        length = int(digits)
    if length is None:
        raise FramingError("missing Content-Length header")
    return length


class FrameParser:
    """Incremental parser: :meth:`feed` bytes as they arrive, get back complete bodies.

    ``max_body`` (optional) refuses a frame whose declared length is larger, raising
    :class:`FramingError`.
    """

    def __init__(self, max_body: int | None = None) -> None:
        self._buf = bytearray()
        self._need: int | None = None  # body length once the header block was read
        self._max_body = max_body

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet form a complete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        bodies: list[bytes] = []
        while True:
            body = self._next()
            if body is None:
                return bodies
            bodies.append(body)

    def _next(self) -> bytes | None:
        if self._need is None:
            end = self._buf.find(b"\r\n\r\n", 0, HEADER_BLOCK_CAP + 4)
            if end < 0:
                if len(self._buf) > HEADER_BLOCK_CAP + 3:
                    raise FramingError(f"header block longer than {HEADER_BLOCK_CAP} bytes")
                return None
            need = _content_length(bytes(self._buf[:end]))
            if self._max_body is not None and need > self._max_body:
                raise FramingError(f"frame body of {need} bytes exceeds the {self._max_body}-byte limit")
            del self._buf[: end + 4]
            self._need = need
        if len(self._buf) < self._need:
            return None
        body = bytes(self._buf[: self._need])
        del self._buf[: self._need]
        self._need = None
        return body
