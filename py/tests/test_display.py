"""display() and the matplotlib hook in the child (docs/child-protocol-child.md §3.9)."""
import base64
import subprocess

import pytest

from conftest import PYTHON, run


def data(res):
    return [f.get("data") for f in res.outputs]


def test_display_sends_output_frames_after_flushing_logs():
    """C412: display() flushes what was printed first, then one output frame per object."""
    res = run('print("before", end="")\ndisplay(1, "two")\nprint("after")')
    assert res.value is None
    assert data(res) == [{"text/plain": "1"}, {"text/plain": "'two'"}]
    kinds = [f["type"] for f in res.frames if f["type"] in ("log", "output")]
    assert kinds == ["log", "output", "output", "log"]


def test_child_budget_sends_one_truncation_and_never_encodes_past_it():
    """C413: an object whose bundle does not fit is never encoded: one truncated frame, then nothing."""
    res = run('class B:\n    def _repr_png_(self):\n        return bytes(4096)\n'
              'display("ok")\ndisplay(B())\ndisplay("later")', maxOutputBytes=1000)
    assert [f.get("truncated") for f in res.outputs] == [None, True]
    assert all(len(line) < 200 for line in res.raw)


def test_child_bills_types_overheads_and_escapes():
    """C442: the child's count bills each output 32, each entry 8 plus its MIME type, and a
    text as its JSON string form: with 200 bytes, "x" * 100 (32 + 8 + 10 + 102) fits and a
    text of 10 control characters (32 + 8 + 10 + 62) then does not."""
    res = run('display("x" * 100)\ndisplay(chr(1) * 10)\ndisplay("later")', maxOutputBytes=200)
    assert [f.get("truncated") for f in res.outputs] == [None, True]


def test_child_cuts_a_bundle_of_too_many_types_with_a_log_line():
    """C443: a bundle of 5000 types (5001 with text/plain) is cut to its first 63 and text/plain, with a log line."""
    res = run('class K:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n'
              '        return {"text/x-%d" % i: "" for i in range(5000)}\n'
              'display(K())')
    (d,) = data(res)
    assert list(d)[:63] == ["text/x-%d" % i for i in range(63)]
    assert len(d) == 64 and list(d)[-1] == "text/plain"
    assert any("a K has 5001 MIME types; the first 63 and text/plain kept" in line for line in res.logs)


def test_child_stops_after_one_output_past_the_count_cap():
    """C444: 10 000 outputs, then one more for the daemon to refuse with its marker, then nothing."""
    res = run('for _ in range(10005):\n    display(1)')
    assert len(res.outputs) == 10001


def test_binary_types_travel_as_base64_text_types_as_text():
    res = run('class R:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n'
              '        return {"image/gif": b"GIF8", "application/xml": "<a/>"}, {}\n'
              'display(R())')
    (d,) = data(res)
    assert base64.b64decode(d["image/gif"]) == b"GIF8"
    assert d["application/xml"] == "<a/>"
    assert d["text/plain"].startswith("<__main__.")


def test_large_frame_is_gathered_whole_and_in_order():
    """A frame above 64 KiB goes out by writev, in as many calls as the socket needs: two
    megabyte payloads and the small pieces around them arrive as one intact line."""
    res = run('class R:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n'
              '        return {"image/png": bytes(range(256)) * 4096, "text/html": "<p>" * 90000,'
              ' "image/gif": b"GIF8"}\n'
              'display(R())\ndisplay("after")')
    big, after = data(res)
    assert base64.b64decode(big["image/png"]) == bytes(range(256)) * 4096
    assert big["text/html"] == "<p>" * 90000
    assert base64.b64decode(big["image/gif"]) == b"GIF8"
    assert after == {"text/plain": "'after'"}


def test_display_is_owned_and_matplotlib_costs_nothing_unused():
    """C414: display is a global and a builtin; without a matplotlib import nothing is set or loaded."""
    res = run('import os, sys, builtins\n'
              'return [display is builtins.display, "MPLBACKEND" in os.environ, '
              '"matplotlib" in sys.modules]')
    assert res.value == [True, False, False]


def has_matplotlib():
    return subprocess.run([PYTHON, "-I", "-c", "import matplotlib"], capture_output=True).returncode == 0


@pytest.mark.skipif(not has_matplotlib(), reason="matplotlib not installed for the child's interpreter")
def test_plt_show_displays_and_closes():
    res = run('import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n'
              'return [plt.get_backend(), len(plt.get_fignums())]',
              addressSpaceBytes=2048 << 20, timeout=60)
    assert res.value == ["module://_coderun_mpl", 0]
    (d,) = data(res)
    assert base64.b64decode(d["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
