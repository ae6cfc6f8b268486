"""A runnable example of a persistent session: load data in one run, use it in the next, branch
the state with fork(), and hear about sessions the daemon ends on its own.

    cd clients/python && CODERUN_RPC_BIN=../../bin/coderun-rpc python3 examples/session_demo.py
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # run from a checkout

from coderun import Client  # noqa: E402


async def main() -> int:
    async with await Client.start(env={"CODERUN_LOG_LEVEL": "warn"}) as client:
        client.on_session_closed(lambda e: print(f"session {e.session_id} closed by the daemon: {e.reason}"))
        async with client.session(idle_timeout_ms=60_000) as s:
            await s.run('scores = {"ada": 3, "bob": 5}')
            best = await s.run("return max(scores, key=scores.get)")
            print("best so far:", best.value, "| session:", best.session)
            async with await s.fork() as what_if:  # a copy of the state, to try something out
                await what_if.run('scores["cy"] = 9')
                print("in the fork:", (await what_if.run("return sorted(scores)")).value)
            print("in the source:", (await s.run("return sorted(scores)")).value)
        brief = await client.open_session(idle_timeout_ms=100)
        await asyncio.sleep(0.5)
        print("a session left idle is now", brief.state, f"({brief.reason})")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
