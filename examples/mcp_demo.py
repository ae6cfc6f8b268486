#!/usr/bin/env python3
"""`coderun-rpc mcp` as an MCP host sees it, driven by the official Python MCP SDK.

It writes an mcpServers file with two real upstream servers — server-everything (npm, from
mcp/tests/node_modules) and mcp-server-time (PyPI) — starts `coderun-rpc mcp --mcp-config FILE`
the way an MCP host would, and prints
  1. the tool list: run_python's description, which carries the stubs of every upstream tool;
  2. one run_python call whose program calls three upstream tools in one go, with its log
     lines arriving as progress notifications, then the text and structured result.

    make demo-mcp        # or: .venv/bin/python examples/mcp_demo.py
"""

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
EVERYTHING = REPO / "mcp" / "tests" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"

PROGRAM = """
print("asking two servers")
now = await time_server.get_current_time(timezone="Europe/Lisbon")
total = await everything["get-sum"](a=19, b=23)
echo = await everything.echo(message=f"it is {now['datetime']} in Lisbon")
return {"sum": total, "echo": echo, "dst": now["is_dst"]}
"""


async def main() -> None:
    daemon = os.environ.get("CODERUN_RPC_BIN") or str(REPO / "bin" / "coderun-rpc")
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {
            "everything": {"command": "node", "args": [str(EVERYTHING), "stdio"]},
            "time-server": {"command": str(Path(sys.executable).parent / "mcp-server-time")},
        }}, indent=2))
        print("== mcp.json\n" + config.read_text())
        params = StdioServerParameters(command=daemon, args=["mcp", "--mcp-config", str(config)],
                                       env={**os.environ, "CODERUN_LOG_LEVEL": "warn"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for tool in (await session.list_tools()).tools:
                print(f"== tool {tool.name}\n{tool.description}\n")

            async def progress(value: float, total: float | None, message: str | None) -> None:
                print(f"   progress {value:g}: {message}")

            print("== run_python\n" + PROGRAM)
            result = await session.call_tool("run_python", {"program": PROGRAM}, progress_callback=progress)
            print("== isError:", result.is_error)
            for item in result.content:
                print("== text\n" + getattr(item, "text", repr(item)))
            print("== structuredContent\n" + json.dumps(result.structured_content, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
