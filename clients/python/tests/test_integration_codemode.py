"""coderun.integrations.CodeMode, the core every adapter shares, against the real daemon."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from coderun import ConnectionLost
from coderun.integrations import CodeMode, HostTool

from conftest import code_daemon, daemon_binary

pytestmark = pytest.mark.skipif(daemon_binary() is None, reason="daemon not built (make build)")


def test_namespace_must_be_an_identifier() -> None:
    for bad in ("my tools", "for", "tøols", ""):
        with pytest.raises(ValueError, match="namespace"):
            CodeMode(namespace=bad)


def test_close_from_the_private_loop_does_not_wait_for_itself() -> None:
    """A finalizer may run on the private loop's thread: closing there must not deadlock, and
    the loop's thread still ends."""
    code = CodeMode(daemon=code_daemon(), session=False)
    threads: list[threading.Thread] = []

    async def closer(_: dict[str, Any]) -> Any:
        threads.append(threading.current_thread())
        code.close()  # on the private loop: a synchronous run's tools run there
        return "closing"

    tool = HostTool("closer", "Close the code mode.", {"type": "object", "properties": {}}, closer)
    try:  # the run ends whichever comes first: its value, the daemon's abort, the connection's end
        text = code.run_sync("return await tools.closer()", [tool]).text
        assert text in ('value: "closing"', "error (abort): server is shutting down")
    except ConnectionLost:
        pass
    threads[0].join(30)
    assert not threads[0].is_alive()
    assert code.run_sync("return 5", []).text == "value: 5"  # started again on use
    code.close()
