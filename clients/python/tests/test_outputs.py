"""Files in, files and rich outputs out, through the real built daemon (docs/protocol-files.md §12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coderun import Client, InvalidParams, OutFile, Output, OutputEvent
from coderun._outputs import build_files

from conftest import daemon_binary

BIN = daemon_binary()
needs_daemon = pytest.mark.skipif(BIN is None, reason="daemon not built (make build)")


def test_build_files_accepts_str_and_bytes() -> None:
    assert build_files({"a.txt": "é", "b.bin": b"\x00\x01", "c": bytearray(b"z"), "d": memoryview(b"")}) == [
        {"path": "a.txt", "text": "é"},
        {"path": "b.bin", "base64": "AAE="},
        {"path": "c", "base64": "eg=="},
        {"path": "d", "base64": ""},
    ]
    with pytest.raises(TypeError, match=r"files\['x'\] must be str or bytes, not int"):
        build_files({"x": 1})  # type: ignore[dict-item]


def test_helpers_decode_and_save(tmp_path: Path) -> None:
    o = Output({"image/png": "iVBORw==", "text/plain": "<fig>"})
    assert o.bytes("image/png") == b"\x89PNG" and o.text() == "<fig>" and o.bytes("text/plain") == b"<fig>"
    f = OutFile("out/sub/r.txt", 2, base64="aGk=")
    assert f.data == b"hi" and f.save(tmp_path) == tmp_path / "sub" / "r.txt"
    assert (tmp_path / "sub" / "r.txt").read_bytes() == b"hi"
    with pytest.raises(ValueError, match="omitted"):
        OutFile("out/x", 5, omitted=True).data
    with pytest.raises(ValueError, match="outside"):
        OutFile("out/../../etc/x", 1, base64="eA==").save(tmp_path)


@needs_daemon
async def test_files_outputs_and_streaming(tmp_path: Path) -> None:
    seen: list[object] = []
    async with await Client.start(BIN, env={"CODERUN_LOG_LEVEL": "warn"}) as c:
        r = await c.run(
            'data = open("in.csv").read()\n'
            'print("before")\n'
            'display({"rows": data.count("\\n")})\n'
            'open("out/copy.bin", "wb").write(open("blob", "rb").read())\n'
            "return data",
            files={"in.csv": "a\n1\n", "blob": b"\x00\xff"},
            on_log=lambda e: seen.append(e.text),
            on_output=lambda e: seen.append(e),
        )
        assert r.ok and r.value == "a\n1\n"
        assert [o.text() for o in r.outputs] == ["{'rows': 2}"]
        assert [(f.path, f.size, f.data) for f in r.files] == [("out/copy.bin", 2, b"\x00\xff")]
        assert r.save_files(tmp_path) == [tmp_path / "copy.bin"]
        assert seen[0] == "before" and isinstance(seen[1], OutputEvent) and seen[1].output == r.outputs[0]
        with pytest.raises(InvalidParams, match=r"files\[0\].path \"../x\" must not contain a '..' segment"):
            await c.run("", files={"../x": ""})
