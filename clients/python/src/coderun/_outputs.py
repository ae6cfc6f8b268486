"""Files in, files and rich outputs out (docs/protocol-files.md §12): the typed views and helpers."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Union

__all__ = ["FileInput", "Files", "Output", "OutputEvent", "OutFile", "build_files", "is_text_mime"]

FileInput = Union[str, bytes, bytearray, memoryview]
"""A file's content for ``run(files=…)``: ``str`` is sent as UTF-8 text, bytes as base64."""

Files = Mapping[str, FileInput]
"""``{relative path: content}``, written into the run's working directory before it starts."""


def is_text_mime(mime: str) -> bool:
    """True when content of type ``mime`` travels as text (else base64), as the daemon decides."""
    return (
        mime.startswith("text/")
        or mime.endswith(("/json", "+json", "/xml", "+xml"))
        or mime == "application/javascript"
    )


def build_files(files: Files) -> list[dict[str, str]]:
    """The ``run.files`` entries for ``{path: content}`` (TypeError naming a bad entry)."""
    if not isinstance(files, Mapping):
        raise TypeError("files must be a mapping {relative path: str | bytes}")
    out: list[dict[str, str]] = []
    for path, content in files.items():
        if not isinstance(path, str):
            raise TypeError(f"files has a path that is not a str: {path!r}")
        if isinstance(content, str):
            out.append({"path": path, "text": content})
        elif isinstance(content, (bytes, bytearray, memoryview)):
            out.append({"path": path, "base64": base64.b64encode(bytes(content)).decode("ascii")})
        else:
            raise TypeError(f"files[{path!r}] must be str or bytes, not {type(content).__name__}")
    return out


@dataclass(frozen=True)
class Output:
    """One displayed object: ``data`` maps each MIME type to its content as sent (base64 for
    binary types, text otherwise)."""

    data: Mapping[str, str]

    def bytes(self, mime: str) -> bytes:
        """The content of ``mime`` as bytes (decoded base64, or UTF-8 text); KeyError if absent."""
        value = self.data[mime]
        return value.encode("utf-8") if is_text_mime(mime) else base64.b64decode(value, validate=True)

    def text(self, mime: str = "text/plain") -> str:
        """The text content of a text type (``text/plain`` by default); KeyError if absent."""
        if not is_text_mime(mime):
            raise ValueError(f"{mime} is a binary type: use bytes({mime!r})")
        return self.data[mime]


@dataclass(frozen=True)
class OutputEvent:
    """One ``run/output`` notification: output ``index`` of run ``run_id``."""

    run_id: Union[int, str]
    index: int
    output: Output


@dataclass(frozen=True)
class OutFile:
    """A regular file the program left under ``out/``. ``omitted`` files (the outputs budget ran
    out before them) carry their size but no content."""

    path: str
    size: int
    omitted: bool = False
    base64: str = ""

    @property
    def data(self) -> bytes:
        """The file's bytes; ValueError for an omitted file."""
        if self.omitted:
            raise ValueError(f"{self.path} was omitted: the run's outputs budget ran out before it")
        return base64.b64decode(self.base64, validate=True)

    def save(self, directory: Union[str, os.PathLike[str]]) -> Path:
        """Write the file under ``directory`` at its path without the leading ``out/``, creating
        folders; returns where. ValueError for an omitted file or a path that would leave
        ``directory``."""
        rel = PurePosixPath(self.path)
        if rel.parts[:1] == ("out",):
            rel = PurePosixPath(*rel.parts[1:])
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"refusing to save {self.path!r} outside {directory}")
        target = Path(directory, *rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.data)
        return target


def parse_output(raw: Any) -> Output | None:
    data = raw.get("data") if isinstance(raw, dict) else None
    if not isinstance(data, dict):
        return None
    return Output({k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)})


def parse_outputs(raw: Any) -> list[Output]:
    if not isinstance(raw, list):
        return []
    return [o for o in (parse_output(x) for x in raw) if o is not None]


def parse_files(raw: Any) -> list[OutFile]:
    out: list[OutFile] = []
    for f in raw if isinstance(raw, list) else []:
        if not isinstance(f, dict) or not isinstance(f.get("path"), str):
            continue
        size = f.get("size")
        b64 = f.get("base64")
        out.append(OutFile(
            path=f["path"],
            size=size if isinstance(size, int) and not isinstance(size, bool) else 0,
            omitted=f.get("omitted") is True,
            base64=b64 if isinstance(b64, str) else "",
        ))
    return out
