"""C814, C1021: egress from the Python client: a run's ``egress`` narrowing, ``result.egress``
and a run's ``secrets``."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from coderun import Client, EgressEntry, InvalidParams

from conftest import daemon_binary

BIN = daemon_binary()
pytestmark = pytest.mark.skipif(BIN is None, reason="daemon not built (make build)")


SEEN_KEYS: list[str | None] = []


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        SEEN_KEYS.append(self.headers.get("X-Key"))
        body = b"hello from upstream"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()
    t.join()


FETCH = """import urllib.request, urllib.error
out = []
for u in URLS:
    try:
        with urllib.request.urlopen(u, timeout=30) as r:
            out.append([r.status, r.read().decode()])
    except urllib.error.HTTPError as e:
        out.append([e.code, e.read().decode()[:200]])
return out
"""


async def test_egress_through_the_client(upstream: int, tmp_path: Path) -> None:
    policy = tmp_path / "egress.json"
    policy.write_text(json.dumps({"allow": [{"host": "api.test", "ports": [upstream], "private": True},
                                            {"host": "other.test", "ports": [upstream], "private": True}]}))
    env = {"CODERUN_LOG_LEVEL": "warn", "CODERUN_EGRESS": str(policy),
           "CODERUN_EGRESS_HOSTS": "api.test=127.0.0.1,other.test=127.0.0.1"}
    async with await Client.start(BIN, env=env) as c:
        assert c.capabilities["egress"]["allow"] == [f"api.test:{upstream} (private)", f"other.test:{upstream} (private)"]
        urls = [f"http://api.test:{upstream}/x?k=1", f"http://other.test:{upstream}/"]
        r = await c.run(f"URLS = {urls!r}\n" + FETCH, egress=[{"host": f"api.test:{upstream}", "private": True}])
        assert r.ok, r.error
        assert r.value[0] == [200, "hello from upstream"]
        assert r.value[1][0] == 403 and "not allowed by the egress policy" in r.value[1][1]
        assert r.egress == [
            EgressEntry("api.test", upstream, "GET", 200, len("hello from upstream"), r.egress[0].ms),
            EgressEntry("other.test", upstream, "GET", 403, 0, r.egress[1].ms),
        ]
        with pytest.raises(InvalidParams, match=r"egress\[0\] \(elsewhere.test\) is not within"):
            await c.run("return 1", egress=["elsewhere.test"])
        with pytest.raises(TypeError):
            await c.run("return 1", egress="api.test")  # type: ignore[arg-type]


async def test_secrets_through_the_client(upstream: int, tmp_path: Path) -> None:
    """C1021: a run's and a session's ``secrets`` reach their host only; a bad entry is InvalidParams."""
    policy = tmp_path / "egress.json"
    policy.write_text(json.dumps({"allow": [{"host": "api.test", "ports": [upstream], "private": True},
                                            {"host": "other.test", "ports": [upstream], "private": True}]}))
    env = {"CODERUN_LOG_LEVEL": "warn", "CODERUN_EGRESS": str(policy),
           "CODERUN_EGRESS_HOSTS": "api.test=127.0.0.1,other.test=127.0.0.1"}
    SEEN_KEYS.clear()
    async with await Client.start(BIN, env=env) as c:
        urls = [f"http://api.test:{upstream}/", f"http://other.test:{upstream}/"]
        r = await c.run(f"URLS = {urls!r}\n" + FETCH,
                        secrets=[{"hosts": ["api.test"], "header": "X-Key", "value": "py-secret"}])
        assert r.ok, r.error
        assert [v[0] for v in r.value] == [200, 200]
        assert SEEN_KEYS == ["py-secret", None]
        with pytest.raises(InvalidParams, match=r"secrets\[0\]\.hosts\[0\] \"elsewhere.test\" is not within"):
            await c.run("return 1", secrets=[{"hosts": ["elsewhere.test"], "env": "KEY", "value": "v"}])
        with pytest.raises(TypeError):
            await c.run("return 1", secrets={"hosts": ["api.test"], "env": "KEY", "value": "v"})  # type: ignore[arg-type]
        SEEN_KEYS.clear()
        async with c.session(secrets=[{"hosts": ["api.test"], "header": "X-Key", "value": "py-session"}]) as s:
            r = await s.run(f"URLS = {urls[:1]!r}\n" + FETCH)
            assert r.ok, r.error
        assert SEEN_KEYS == ["py-session"]


async def test_no_egress_policy() -> None:
    async with await Client.start(BIN, env={"CODERUN_LOG_LEVEL": "warn"}) as c:
        assert "egress" not in c.capabilities
        r = await c.run("return 1")
        assert r.egress is None
        with pytest.raises(InvalidParams, match="no egress policy"):
            await c.run("return 1", egress=[])
