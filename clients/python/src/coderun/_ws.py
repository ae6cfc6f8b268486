"""The WebSocket transport of :meth:`Client.connect` (``ws://`` and ``wss://``): optional.

The client itself is standard-library only; WebSocket needs the ``websockets`` package,
installed with the ``ws`` extra (``pip install 'coderun[ws]'``). A daemon's WebSocket
listener carries one JSON-RPC message per text message (docs/service.md §2), while the
client reads and writes LSP-framed bytes, so this module adapts between the two: the
reader frames each text message it receives, the writer strips the framing and sends each
body as one text message, in order. The token goes in the upgrade's ``Authorization``
header.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from ._framing import FrameParser, frame_header

__all__ = ["open_websocket"]

INSTALL_HINT = "pip install 'coderun[ws]'"


async def open_websocket(address: str, token: Optional[str]) -> tuple["WebSocketReader", "WebSocketWriter"]:
    """Open the WebSocket at ``address``; ImportError naming the extra when it is absent."""
    try:
        from websockets.asyncio.client import connect
    except ImportError as e:
        raise ImportError(
            f"Client.connect({address!r}) needs the optional websockets package: {INSTALL_HINT}"
        ) from e
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    # Results are bounded by the daemon's budgets, as on every other transport: no size cap
    # of our own. The daemon negotiates no compression.
    ws = await connect(address, additional_headers=headers, max_size=None, compression=None)
    return WebSocketReader(ws), WebSocketWriter(ws)


class WebSocketReader:
    """Each received text message as one LSP frame; ``b""`` once the daemon closed cleanly."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws

    async def read(self, n: int = -1) -> bytes:
        """One whole frame, whatever ``n`` (the client's parser takes any size)."""
        from websockets.exceptions import ConnectionClosed, ConnectionClosedOK

        try:
            msg: "str | bytes" = await self._ws.recv()
        except ConnectionClosedOK:
            return b""
        except ConnectionClosed as e:  # the close frame says why (a refusal, a binary message)
            raise ConnectionError(f"the WebSocket closed: {e}") from None
        if isinstance(msg, bytes):
            raise ConnectionError("the daemon sent a binary WebSocket message")
        body = msg.encode("utf-8")
        return frame_header(len(body)) + body


class WebSocketWriter:
    """Sends each framed body written to it as one text message, in order, from a task of
    its own (``write`` never blocks, as a stream's does not); ``drain`` waits until what was
    written is sent and raises ConnectionError once a send failed."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._frames = FrameParser()
        self._queue: asyncio.Queue[Optional[str]] = asyncio.Queue()
        self._failed: Optional[BaseException] = None
        self._closing = False
        self._sender = asyncio.ensure_future(self._send_loop())

    def write(self, data: bytes) -> None:
        for body in self._frames.feed(data):
            self._queue.put_nowait(body.decode("utf-8"))

    async def drain(self) -> None:
        await self._queue.join()
        if self._failed is not None:
            raise ConnectionError(f"writing to the WebSocket failed: {self._failed}")

    def close(self) -> None:
        """Close the WebSocket once what was written is sent (idempotent)."""
        if not self._closing:
            self._closing = True
            self._queue.put_nowait(None)

    async def _send_loop(self) -> None:
        while True:
            text = await self._queue.get()
            try:
                if text is None:
                    await self._ws.close()
                elif self._failed is None:
                    await self._ws.send(text)
            except Exception as e:  # noqa: BLE001 - a lost connection; drain reports it
                self._failed = e
            finally:
                self._queue.task_done()
            if text is None:
                return
