#!/usr/bin/env python3
"""An example agent host for coderun-rpc (standard library only).

It starts the daemon (CODERUN_RPC_BIN, else ./bin/coderun-rpc), initializes,
and declares two typed host tools (JSON Schemas for their arguments and
results). It then
  1. asks `bindings/describe` for the Python stub a model would be given;
  2. sends a `run` whose program — as a language model might write it — calls
     both tools concurrently with asyncio.gather; the host answers every
     `binding/call` and the streamed `run/log` notifications are printed as
     they arrive;
  3. sends a `run` that passes a wrong argument: the daemon refuses it against
     the schema, the program gets a TypeError, and the host is never called;
  4. sends a CSV file with a `run` whose program plots it with matplotlib
     (when the daemon's interpreter has it) and shows the figure: the PNG it
     gets back is written to examples/out/plot.png and its size printed.
  5. opens a persistent session, loads data in one run and uses it in the
     next (the interpreter and its top-level names are kept), then closes it.

    make demo        # or: python3 examples/agent.py
"""

import asyncio
import base64
import json
import os
import sys

PROGRAM = """
import asyncio
city = "Lisbon"
print("looking things up for", city)
found, weather = await asyncio.gather(
    tools.search(f"things to do in {city}", 3),
    tools.weather(city=city),
)
print(f"{len(found)} results; it is {weather['tempC']} C and {weather['sky']}")
best = [hit for hit in found if weather["sky"] != "rain" or hit["indoor"]]
return {"city": city, "plan": [hit["title"] for hit in best], "weather": weather}
"""


# A model's mistake: `limit` must be an integer.
WRONG_PROGRAM = """
try:
    return await tools.search("museums", limit="three")
except TypeError as e:
    return f"TypeError: {e}"
"""


# Step 4: a CSV in, a chart out (docs/protocol-files.md §12).
CSV = "day,visitors\n" + "".join(f"{d},{v}\n" for d, v in enumerate([120, 135, 90, 160, 210, 240, 180], 1))
PLOT_PROGRAM = """
import csv
rows = list(csv.DictReader(open("visitors.csv")))
try:
    import matplotlib.pyplot as plt
except ImportError:
    return "matplotlib is not installed for the daemon's interpreter"
plt.plot([int(r["day"]) for r in rows], [int(r["visitors"]) for r in rows], marker="o")
plt.title("visitors per day")
plt.show()
return f"plotted {len(rows)} days"
"""
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")

# A session: the first run loads, the second uses what the first left behind.
LOAD_PROGRAM = """
import random, statistics
random.seed(7)
temps = {city: [random.gauss(mean, 4) for _ in range(365)]
         for city, mean in [("Lisbon", 18), ("Oslo", 6), ("Cairo", 23)]}
return f"loaded {sum(map(len, temps.values()))} readings"
"""

USE_PROGRAM = """
return {city: round(statistics.mean(t), 1) for city, t in temps.items()}
"""


# ---- the host's tools ----------------------------------------------------

async def search(args):
    await asyncio.sleep(0.2)  # pretend to call a search API
    hits = [
        {"title": f"Tram 28 ({args['q']})", "indoor": False},
        {"title": "Gulbenkian Museum", "indoor": True},
        {"title": "Oceanário", "indoor": True},
    ]
    return hits[:args.get("limit", 10)]


async def weather(args):
    await asyncio.sleep(0.1)
    return {"city": args["city"], "tempC": 19, "sky": "rain"}


TOOLS = {"tools": {"search": search, "weather": weather}}
HOST_CALLS = []  # every binding/call the host answered

# The declarations sent with every run: the schemas the daemon checks both
# ways and renders as stubs.
DECLARATIONS = {"tools": [
    {"name": "search", "description": "Search the web for places to visit.",
     "parameters": {"type": "object", "required": ["q"], "additionalProperties": False, "properties": {
         "q": {"type": "string", "description": "what to look for"},
         "limit": {"type": "integer", "minimum": 1, "default": 10, "description": "most results wanted"}}},
     "returns": {"type": "array", "items": {"type": "object", "title": "Hit", "required": ["title", "indoor"],
                                            "properties": {"title": {"type": "string"}, "indoor": {"type": "boolean"}}}}},
    {"name": "weather", "description": "Today's weather in a city.",
     "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
     "returns": {"type": "object", "title": "Weather", "required": ["city", "tempC", "sky"], "properties": {
         "city": {"type": "string"}, "tempC": {"type": "number"},
         "sky": {"enum": ["sun", "cloud", "rain"]}}}},
]}


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
        elif method == "run/output":
            print(f"  [output] {', '.join(params['data'])}", flush=True)
        elif method == "binding/call":
            asyncio.create_task(self.answer(message["id"], params))
        elif method == "$/cancelRequest":
            pass  # a real host would stop the tool call params["id"]

    async def answer(self, call_id, params):
        name = f"{params['namespace']}.{params['function']}"
        HOST_CALLS.append(name)
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


async def session_step(daemon):
    """Step 5: state kept between two runs of one session."""
    session = (await daemon.request("session/open", {}))["sessionId"]
    show(f"\n5. a session ({session}); first run:", LOAD_PROGRAM)
    loaded = await daemon.request("run", {"program": LOAD_PROGRAM, "sessionId": session})
    print("value:", loaded.get("value"), "| session:", loaded.get("session"))
    show("   second run, using what the first left:", USE_PROGRAM)
    used = await daemon.request("run", {"program": USE_PROGRAM, "sessionId": session})
    print("value:", used.get("value"), "| session:", used.get("session"))
    await daemon.request("session/close", {"sessionId": session})
    return "error" not in used and sorted(used["value"]) == ["Cairo", "Lisbon", "Oslo"]


def show(title, text):
    print(title)
    for line in text.strip().splitlines():
        print("  |", line)


async def main():
    daemon = await Daemon.start()
    info = await daemon.request("initialize", {"clientInfo": {"name": "example-agent"}})
    python = info["capabilities"]["python"]
    print(f"coderun-rpc {info['serverInfo']['version']} (Python {python['version']})")
    bindings = [{"global": ns, "functions": fns} for ns, fns in DECLARATIONS.items()]
    limits = {"maxWallMs": 30000, "cpuSeconds": 10}

    described = await daemon.request("bindings/describe", {"bindings": bindings, "limits": limits})
    show("\n1. the stub a model is given (bindings/describe):", described["stubs"])

    show("\n2. the model's program:", PROGRAM)
    result = await daemon.request("run", {
        "program": PROGRAM, "bindings": bindings, "stream": True, "limits": limits,
    })
    ok = "error" not in result
    if ok:
        print("value:", json.dumps(result["value"], ensure_ascii=False, indent=2))
    else:
        print(f"run failed: {result['error']['kind']}: {result['error']['message']}")
    print("logs:", result["logs"])
    print("stats:", result["stats"])

    show("\n3. a program with a wrong argument:", WRONG_PROGRAM)
    calls_before = len(HOST_CALLS)
    wrong = await daemon.request("run", {"program": WRONG_PROGRAM, "bindings": bindings, "limits": limits})
    host_called = len(HOST_CALLS) - calls_before
    print("value:", json.dumps(wrong.get("value"), ensure_ascii=False))
    print(f"the host was called {host_called} times; stats.bindingCalls = {wrong['stats']['bindingCalls']}")
    ok = ok and host_called == 0 and str(wrong.get("value", "")).startswith("TypeError: tools.search()")

    ok = await plot_step(daemon) and ok
    if info["capabilities"].get("sessions", {}).get("max"):
        ok = await session_step(daemon) and ok
    else:
        print("\n5. skipped: this daemon offers no sessions (capabilities.sessions.max is 0 or absent)")

    code = await daemon.close()
    print("\ndaemon exited with", code)
    return 0 if ok and code == 0 else 1


async def plot_step(daemon):
    show("\n4. a CSV in, a chart out:", PLOT_PROGRAM)
    result = await daemon.request("run", {
        "program": PLOT_PROGRAM, "stream": True, "limits": {"maxWallMs": 60000},
        "files": [{"path": "visitors.csv", "text": CSV}],
    })
    if "error" in result:
        print(f"run failed: {result['error']['kind']}: {result['error']['message']}")
        return False
    print("value:", result["value"])
    pngs = [o["data"]["image/png"] for o in result.get("outputs", []) if "image/png" in o["data"]]
    if not pngs:
        return result["value"].startswith("matplotlib is not installed")
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, "plot.png")
    with open(path, "wb") as f:
        f.write(base64.b64decode(pngs[0]))
    print(f"wrote {os.path.relpath(path)}: {os.path.getsize(path)} bytes")
    return True


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
