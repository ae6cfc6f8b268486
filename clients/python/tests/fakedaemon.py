"""A scripted in-memory daemon for transport tests (no process, no real daemon)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from coderun import Client
from coderun._framing import FrameParser, encode_frame


class FakeWriter:
    """What the client writes: parsed into JSON messages on ``inbox``."""

    def __init__(self) -> None:
        self.parser = FrameParser()
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.closed = False

    def write(self, data: bytes) -> None:
        for body in self.parser.feed(data):
            self.inbox.put_nowait(json.loads(body))

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.inbox.put_nowait(None)


class FakeDaemon:
    def __init__(self) -> None:
        self.reader = asyncio.StreamReader()
        self.writer = FakeWriter()

    def send(self, obj: Any) -> None:
        self.reader.feed_data(encode_frame(json.dumps(obj).encode()))

    def send_raw(self, body: bytes) -> None:
        self.reader.feed_data(encode_frame(body))

    def die(self) -> None:
        self.reader.feed_eof()

    async def recv(self, timeout: float = 5.0) -> Any:
        return await asyncio.wait_for(self.writer.inbox.get(), timeout)

    async def connect(self, **kwargs: Any) -> Client:
        task = asyncio.ensure_future(Client.attach(self.reader, self.writer, **kwargs))
        init = await self.recv()
        assert init["method"] == "initialize"
        self.send(
            {
                "jsonrpc": "2.0",
                "id": init["id"],
                "result": {"serverInfo": {"name": "coderun-rpc", "version": "fake"}, "capabilities": {}},
            }
        )
        client = await task
        assert (await self.recv())["method"] == "initialized"
        return client

    def result(self, rid: Any, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})


def ok(value: Any, logs: list[str] | None = None) -> dict[str, Any]:
    return {"value": value, "logs": logs or [], "stats": {}}


def aborted(logs: list[str] | None = None) -> dict[str, Any]:
    return {"logs": logs or [], "error": {"kind": "abort", "message": "run cancelled by the client"}, "stats": {}}
