"""The text a model reads for a run result, the same as ``coderun-rpc mcp`` gives.

The contract is ``clients/testdata/model-text.json`` in the repository: logs first (each
ending in a newline), then ``value: <compact JSON>``, or ``error (kind): message (line N) at
PATH`` with a ``hint:`` line, or ``(no value)``; each lone surrogate is U+FFFD, so the text is
valid UTF-8; the displayed images travel separately.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field

from ._json import encode
from ._outputs import Output
from .types import RunResult

__all__ = ["ModelText", "Image", "model_text", "IMAGE_TYPES"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image types a model is shown, in order of preference within one output."""

_SIGNATURES = {
    "image/png": re.compile(rb"\x89PNG\r\n\x1a\n"),
    "image/jpeg": re.compile(rb"\xff\xd8\xff"),
    "image/gif": re.compile(rb"GIF8[79]a"),
    "image/webp": re.compile(rb"RIFF....WEBP", re.DOTALL),
}
"""How the bytes of each image type begin: the daemon drops an image whose bytes do not, and
the model is shown none that does not either (protocol/images.go holds the same table)."""


@dataclass(frozen=True)
class Image:
    """One displayed image: its MIME type and its bytes."""

    mime: str
    data: bytes


@dataclass(frozen=True)
class ModelText:
    """What a model reads for a run: ``text``, whether the run failed, and its images."""

    text: str
    is_error: bool
    images: list[Image] = field(default_factory=list)


def model_text(result: RunResult) -> ModelText:
    """The model's view of ``result`` (see the module documentation for the format)."""
    parts = [log if log.endswith("\n") else log + "\n" for log in result.logs]
    err = result.error
    if err is not None:
        line = f"error ({err.kind}): {err.message}"
        if err.line is not None:
            line += f" (line {err.line})"
        if err.path is not None:
            line += f" at {err.path}"
        if err.hint is not None:
            line += f"\nhint: {err.hint}"
        parts.append(line)
    elif result.has_value:
        parts.append("value: " + encode(result.value).decode("utf-8"))
    else:
        parts.append("(no value)")
    images = [img for img in (_image(o) for o in result.outputs) if img is not None]
    # A program may log lone surrogates: a text that is not valid UTF-8 would fail the
    # framework's request to the model, so each becomes U+FFFD (as the MCP server's JSON does).
    text = _LONE_SURROGATE.sub("\ufffd", "".join(parts))
    return ModelText(text, err is not None, images)


def _image(output: Output) -> Image | None:
    """The first image type of ``output`` whose content decodes and begins as its format does."""
    for mime in IMAGE_TYPES:
        b64 = output.data.get(mime)
        if b64 is None:
            continue
        try:
            data = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            continue
        if _SIGNATURES[mime].match(data):
            return Image(mime, data)
    return None
