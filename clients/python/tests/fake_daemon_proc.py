"""A tiny stand-in daemon process (stdio, LSP framing) for transport tests with real pipes.

Modes (argv[1]): "serve" answers initialize/shutdown; a run whose program is "sleep" never
answers (until cancelled → abort); any other run answers {"value": <program>}. "exit2" exits 2
at once after writing to stderr.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from coderun._framing import FrameParser, encode_frame  # noqa: E402


def send(obj: object) -> None:
    sys.stdout.buffer.write(encode_frame(json.dumps(obj).encode()))
    sys.stdout.buffer.flush()


def main() -> int:
    if sys.argv[1] == "exit2":
        sys.stderr.write("CODERUN_X: invalid\n")
        return 2
    parser = FrameParser()
    sleeping: set[object] = set()
    shut = False
    while True:
        data = os.read(0, 65536)
        if not data:
            return 0
        for body in parser.feed(data):
            msg = json.loads(body)
            method, rid = msg.get("method"), msg.get("id")
            if method == "initialize":
                send({"jsonrpc": "2.0", "id": rid, "result": {"serverInfo": {"name": "fake"}, "capabilities": {}}})
            elif method == "run":
                if msg["params"]["program"] == "sleep":
                    sleeping.add(rid)
                else:
                    send({"jsonrpc": "2.0", "id": rid, "result": {"value": msg["params"]["program"], "logs": []}})
            elif method == "$/cancelRequest" and msg["params"]["id"] in sleeping:
                sleeping.discard(msg["params"]["id"])
                err = {"kind": "abort", "message": "run cancelled by the client"}
                send({"jsonrpc": "2.0", "id": msg["params"]["id"], "result": {"logs": [], "error": err}})
            elif method == "shutdown":
                for r in sleeping:
                    err = {"kind": "abort", "message": "server is shutting down"}
                    send({"jsonrpc": "2.0", "id": r, "result": {"logs": [], "error": err}})
                sleeping.clear()
                shut = True
                send({"jsonrpc": "2.0", "id": rid, "result": None})
            elif method == "exit":
                return 0 if shut else 1


if __name__ == "__main__":
    sys.exit(main())
