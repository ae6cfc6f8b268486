"""Start-up cost: a run imports only what it needs (docs/containment-start-modes.md §4, docs/child-protocol-child.md §3)."""

import subprocess
import sys

from conftest import PYTHON, run, ns, reply_ok, echo

# Extension modules the bootstrap itself needs; everything else must come from the
# interpreter's own start-up (site) or from what the program asks for.
OWN = {"_ast", "_json", "resource", "math"}


def baseline(tmp_path):
    out = subprocess.run([PYTHON, "-I", "-c", "import sys; print(sorted(sys.modules))"],
                         capture_output=True, text=True, check=True, cwd=tmp_path,
                         env={"TMPDIR": str(tmp_path)}).stdout
    return set(eval(out))


def test_plain_run_imports_only_what_it_needs(tmp_path):
    base = baseline(tmp_path)
    extra = set(run("import sys\nreturn sorted(sys.modules)").value) - base
    assert extra <= OWN, extra
    # and the exception path (diagnostics compiled on demand) stays as lean
    msg = run("import sys\nraise ValueError(sorted(sys.modules))").error["message"]
    mods = eval(msg.rsplit("ValueError: ", 1)[1])
    assert set(mods) - base <= OWN, set(mods) - base


def test_cold_section_compiled_only_on_demand():
    prog = ("import sys\n"
            "f = sys._getframe()\n"
            "while f.f_code.co_name != '_coderun_child':\n"
            "    f = f.f_back\n"
            "P = f.f_locals['P']\n"
            "return [hasattr(P, 'make_diagnostics'), hasattr(P, 'make_codec'),\n"
            "        'typing' in sys.modules and 'typing' not in %r]")
    v = run(prog % (sorted(sys.modules),)).value
    assert v[:2] == [False, True]


def test_awaiting_bindings_needs_no_asyncio(tmp_path):
    """A program awaiting only bindings (and stdlib code) is driven without asyncio."""
    base = baseline(tmp_path)
    prog = ("import sys, json\n"
            "async def twice(v):\n"
            "    return [await tools.x(v), await tools.x(v)]\n"
            "r = await twice(1)\n"
            "return [r, sorted(sys.modules)]")
    res = run(prog, lambda f: reply_ok(f, f["args"]), [ns("tools", "x")])
    r, mods = res.value
    assert r == [1, 1]
    assert set(mods) - base - {"json", "json.decoder", "json.scanner", "json.encoder", "re",
                               "enum", "_sre", "sre_compile", "sre_parse", "sre_constants",
                               "re._compiler", "re._parser", "re._constants", "re._casefix",
                               "copyreg", "functools", "_functools"} <= OWN


def test_bindings_typed_or_not_import_nothing_until_introspected(tmp_path):
    """A run calling untyped or typed bindings imports nothing new; reading a typed
    function's signature is what brings in inspect (docs/child-protocol-child.md §3.5)."""
    base = baseline(tmp_path)
    listing = "import sys\nreturn sorted(sys.modules)"
    untyped = run("await tools.x(q=1)\n" + listing, echo, [ns("tools", "x")]).value
    assert set(untyped) - base <= OWN, set(untyped) - base
    signature = {"params": [{"name": "q", "required": True}], "doc": "",
                 "stub": "async def x(self, q: str) -> Any:\n    ...\n"}
    typed = [ns("tools", "x", signatures=[signature])]
    called = run("await tools.x(1)\nawait tools.x(q=2)\n" + listing, echo, typed).value
    assert set(called) - base <= OWN | {"keyword"}, set(called) - base
    assert "inspect" not in called and "ast" not in called
    looked = run("tools.x.__signature__\n" + listing, echo, typed).value
    assert {"inspect", "ast"} <= set(looked)


def test_asyncio_program_gets_asyncio_and_nothing_else_from_us(tmp_path):
    base = baseline(tmp_path)
    prog = "import sys, asyncio\nawait tools.x()\nreturn sorted(sys.modules)"
    res = run(prog, lambda f: reply_ok(f, 1), [ns("tools", "x")])
    extra = set(res.value) - base
    assert "asyncio" in extra
    probe = subprocess.run(
        [PYTHON, "-I", "-c", "import sys, asyncio, _asyncio; print(sorted(sys.modules))"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
        env={"TMPDIR": str(tmp_path)}).stdout
    assert extra <= set(eval(probe)) | OWN, extra - set(eval(probe)) - OWN


def test_driver_mode_rules():
    """Which programs are driven without an event loop (protocol.compile_program)."""
    import protocol
    cases = {"return await t.x()": False,
             "import json, re, math\nreturn await t.x()": False,
             "import asyncio\nreturn 1": True,
             "return 1  # asyncio": True,
             "import numpy\nreturn await t.x()": True,
             "import threading\nreturn await t.x()": True,
             "from . import x\nreturn await t.x()": True,
             "m = __import__('json')\nreturn await t.x()": True,
             "import aiohttp\nreturn 1": True,
             "import json\nreturn 1": False,
             "from concurrent import futures\nreturn await t.x()": True}
    for src, want in cases.items():
        assert protocol.compile_program(src)[1] is want, src


def test_driver_rejects_foreign_awaitables_clearly():
    prog = ("class Foreign:\n"
            "    def __await__(self):\n"
            "        yield 'something else'\n"
            "await Foreign()")
    err = run(prog).error
    assert err["exceptionType"] == "RuntimeError"
    assert "needs an asyncio event loop" in err["message"]
    prog = ("import types\n"
            "@types.coroutine\n"
            "def tick():\n"
            "    yield\n"
            "await tick()\n"
            "return 'ticked'")
    assert run(prog).value == "ticked"
