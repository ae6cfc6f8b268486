#!/usr/bin/env python3
"""An example agent host for coderun-rpc (standard library only).

It starts the daemon (CODERUN_RPC_BIN, else ./bin/coderun-rpc), initializes,
and sends one `run` whose program — as a language model might write it —
calls two host tools concurrently with asyncio.gather. The host implements
the tools, answers every `binding/call`, prints the streamed `run/log`
notifications as they arrive, then the result, and shuts the daemon down.

    make demo        # or: python3 examples/agent.py
"""

import asyncio
import json
import os
import sys

PROGRAM = """
import asyncio
city = "Lisbon"
print("looking things up for", city)
found, weather = await asyncio.gather(
    tools.search({"q": f"things to do in {city}"}),
    tools.weather(city=city),
)
print(f"{len(found)} results; it is {weather['tempC']} C and {weather['sky']}")
best = [hit for hit in found if weather["sky"] != "rain" or hit["indoor"]]
return {"city": city, "plan": [hit["title"] for hit in best], "weather": weather}
"""


# ---- the host's tools ----------------------------------------------------

async def search(args):
    await asyncio.sleep(0.2)  # pretend to call a search API
    return [
        {"title": f"Tram 28 ({args['q']})", "indoor": False},
        {"title": "Gulbenkian Museum", "indoor": True},
        {"title": "Oceanário", "indoor": True},
    ]


async def weather(args):
    await asyncio.sleep(0.1)
    return {"city": args["city"], "tempC": 19, "sky": "rain"}


TOOLS = {"tools": {"search": search, "weather": weather}}


# ---- a minimal JSON-RPC 2.0 client with LSP framing ------------------------

class Daemon:
    def __init__(self, proc):
        self.proc = proc
        self.next_id = 0
        self.pending = {}
        self.reader = asyncio.create_task(self.read_loop())

    @classmethod
    async def start(cls):
        binary = os.environ.get("CODERUN_RPC_BIN") or os.path.join(".", "bin", "coderun-rpc")
        env = dict(os.environ)
        env.setdefault("CODERUN_LOG_LEVEL", "warn")  # keep the demo's terminal quiet
        proc = await asyncio.create_subprocess_exec(
            binary, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=env, limit=1 << 26)
        return cls(proc)

    def send(self, message):
        body = json.dumps(message, allow_nan=False, ensure_ascii=False).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method, params=None):
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        await self.proc.stdin.drain()
        reply = await future
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']['message']}")
        return reply["result"]

    def notify(self, method, params=None):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def read_loop(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = await out.readline()
                if not line:
                    for future in self.pending.values():
                        if not future.done():
                            future.set_exception(EOFError("the daemon went away"))
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            message = json.loads(await out.readexactly(length))
            if "method" in message:
                self.on_message(message)
            elif message.get("id") in self.pending:
                self.pending.pop(message["id"]).set_result(message)

    def on_message(self, message):
        method, params = message["method"], message.get("params") or {}
        if method == "run/log":
            print(f"  [log] {params['text']}", flush=True)
        elif method == "binding/call":
            asyncio.create_task(self.answer(message["id"], params))
        elif method == "$/cancelRequest":
            pass  # a real host would stop the tool call params["id"]

    async def answer(self, call_id, params):
        name = f"{params['namespace']}.{params['function']}"
        print(f"  [host] {name}({json.dumps(params['args'], ensure_ascii=False)})", flush=True)
        try:
            fn = TOOLS[params["namespace"]][params["function"]]
            reply = {"jsonrpc": "2.0", "id": call_id, "result": await fn(params["args"])}
        except Exception as exc:  # the program sees RuntimeError / its error class
            reply = {"jsonrpc": "2.0", "id": call_id, "error": {"code": -32000, "message": str(exc)}}
        self.send(reply)
        await self.proc.stdin.drain()

    async def close(self):
        await self.request("shutdown")
        self.notify("exit")
        await self.proc.stdin.drain()
        self.proc.stdin.close()
        code = await self.proc.wait()
        self.reader.cancel()
        return code


async def main():
    daemon = await Daemon.start()
    info = await daemon.request("initialize", {"clientInfo": {"name": "example-agent"}})
    python = info["capabilities"]["python"]
    print(f"coderun-rpc {info['serverInfo']['version']} (Python {python['version']})")
    print("program:")
    for line in PROGRAM.strip().splitlines():
        print("  |", line)
    bindings = [{"global": ns, "functions": sorted(fns)} for ns, fns in TOOLS.items()]
    result = await daemon.request("run", {
        "program": PROGRAM, "bindings": bindings, "stream": True,
        "limits": {"maxWallMs": 30000, "cpuSeconds": 10},
    })
    if "error" in result:
        print(f"run failed: {result['error']['kind']}: {result['error']['message']}")
    else:
        print("value:", json.dumps(result["value"], ensure_ascii=False, indent=2))
    print("logs:", result["logs"])
    print("stats:", result["stats"])
    code = await daemon.close()
    print("daemon exited with", code)
    return 0 if "error" not in result and code == 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
