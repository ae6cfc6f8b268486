"""A runnable tour of the coderun client.

    cd clients/python && CODERUN_RPC_BIN=../../bin/coderun-rpc python3 examples/tools_demo.py

(or `pip install coderun`, whose Linux wheels carry the daemon). It prints the stubs a model
would read for two typed host tools, runs a model-style program that calls them, shows streamed
output, a call refused before the host, a tool error caught by the program as ToolError, and
cancellation.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # run from a checkout

from coderun import Client, LogEvent  # noqa: E402

DOCS = {
    "d1": "Python's asyncio runs coroutines on an event loop.",
    "d2": "JSON-RPC 2.0 is a stateless remote procedure call protocol.",
    "d3": "The Language Server Protocol frames JSON-RPC with Content-Length headers.",
}


def search(word: str) -> list[str]:
    """Ids of the documents containing a word (a sync tool: it runs in a worker thread).

    Args:
        word: The word to look for, in any case.
    """
    return [doc_id for doc_id, text in DOCS.items() if word.lower() in text.lower()]


async def fetch(doc_id: str) -> str:
    """A document's text (an async tool: it runs on the event loop)."""
    await asyncio.sleep(0.01)
    if doc_id not in DOCS:
        raise LookupError(f"no document {doc_id!r}")  # the program sees ToolError
    return DOCS[doc_id]


BINDINGS = {"tools": {"search": search, "fetch": fetch}}

PROGRAM = """
hits = await tools.search("json")
print(f"search found {len(hits)} documents")
texts = [await tools.fetch(h) for h in hits]
try:
    await tools.search(42)
except TypeError as e:
    print(f"refused before the host: {e}")
try:
    await tools.fetch(doc_id="d9")
except ToolError as e:
    print(f"{e.tool} failed: {e}")
return {"hits": hits, "chars": sum(len(t) for t in texts)}
"""


async def main() -> None:
    async with await Client.start() as client:
        print("daemon:", client.server_info)
        print("stubs:\n" + await client.describe(bindings=BINDINGS, limits={"maxWallMs": 10_000}))

        def on_log(ev: LogEvent) -> None:
            print(f"  [run {ev.run_id} log {ev.index}] {ev.text}")

        result = await client.run(
            PROGRAM,
            bindings=BINDINGS,
            error_classes={"tools": ("ToolError", "tool")},
            limits={"maxWallMs": 10_000},
            on_log=on_log,
        )
        print("value:", result.value, "| error:", result.error, "| stats:", result.stats)

        failed = await client.run("x = 1\nreturn x / 0")
        assert failed.error is not None
        print("failure:", failed.error.kind, failed.error.exception_type, "line", failed.error.line)

        # Cancellation, two ways: a handle returns the abort result ...
        handle = await client.submit("import asyncio\nprint('working')\nawait asyncio.sleep(60)")
        await asyncio.sleep(0.5)
        handle.cancel()
        aborted = await handle
        print("cancelled via handle:", aborted.error.kind if aborted.error else None, aborted.logs)

        # ... cancelling the awaiting task stops the run and raises CancelledError.
        task = asyncio.ensure_future(client.run("while True:\n    pass"))
        await asyncio.sleep(0.5)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            print("cancelled via task: CancelledError")


if __name__ == "__main__":
    asyncio.run(main())
