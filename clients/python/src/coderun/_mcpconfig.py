"""The ``mcp_config`` option of :meth:`coderun.Client.start` (docs/mcp.md)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any, Iterator, Mapping, Optional, Union

McpConfig = Union[str, "os.PathLike[str]", Mapping[str, Any], None]


@contextlib.contextmanager
def mcp_config_file(config: McpConfig) -> Iterator[Optional[str]]:
    """The path to pass as ``--mcp-config``: a given path as it is; a mapping (the file's
    ``{"mcpServers": ...}`` content) written to a private temporary file, removed on exit (the
    daemon reads the file once, at start-up)."""
    if config is None:
        yield None
        return
    if not isinstance(config, Mapping):
        yield os.fspath(config)
        return
    text = json.dumps(config)  # before creating the file: a bad mapping leaves nothing behind
    fd, path = tempfile.mkstemp(prefix="mcp-config-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        yield path
    finally:
        os.unlink(path)
