"""Start-up cost: a run imports only what it needs (SPEC §9, CHILD-CONTRACT §3)."""

import subprocess
import sys

from conftest import run, ns, reply_ok

# Extension modules the bootstrap itself needs; everything else must come from the
# interpreter's own start-up (site) or from what the program asks for.
OWN = {"_ast", "_json", "resource", "select", "math"}


def baseline(tmp_path):
    out = subprocess.run([sys.executable, "-I", "-c", "import sys; print(sorted(sys.modules))"],
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


def test_awaiting_program_loads_asyncio_but_not_typing_from_us(tmp_path):
    base = baseline(tmp_path)
    prog = "import sys\nawait tools.x()\nreturn sorted(sys.modules)"
    res = run(prog, lambda f: reply_ok(f, 1), [ns("tools", "x")])
    extra = set(res.value) - base
    assert "asyncio" in extra
    import asyncio  # noqa: F401  (what asyncio itself pulls in is not ours)
    probe = subprocess.run(
        [sys.executable, "-I", "-c", "import sys, asyncio, _asyncio; print(sorted(sys.modules))"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
        env={"TMPDIR": str(tmp_path)}).stdout
    assert extra <= set(eval(probe)) | OWN, extra - set(eval(probe)) - OWN
