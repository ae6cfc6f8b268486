"""The program's view, compilation and the basic exchange (docs/child-protocol-child.md §3.1, docs/child-protocol-child.md §3.2)."""

import os

from conftest import Child, run, MIB


def test_boot_ack_run_done(child):
    """boot → boot-ack → run → log → done, frames compact and in order (C37)."""
    child.boot()
    res = child.serve(program='x = 40\ny = 2\nprint("hello", x + y)\nreturn {"answer": x + y}')
    assert res.raw[0] == b'{"type":"boot-ack"}'
    assert res.raw[1] == b'{"type":"log","text":"hello 42"}'
    assert res.done_raw == b'{"type": "done", "value": {"answer":42}}'
    assert res.logs == ["hello 42"]
    assert res.returncode == 0


def test_return_values():
    assert run("return 2 + 2").value == 4                      # C45
    assert run("pass").value is None
    assert run("").value is None
    assert run("x = 1").value is None


def test_top_level_await_without_bindings():
    res = run("import asyncio\nawait asyncio.sleep(0)\nreturn 'slept'")
    assert res.value == "slept"


def test_globals_are_exactly_the_contract():
    res = run("return sorted(globals())", namespaces=[
        {"global": "tools", "names": ["a"], "errorClass": {"name": "ToolError",
                                                           "memberNameProperty": "tool"}}])
    assert res.value == ["ToolError", "__builtins__", "__coderun_main__", "__name__", "display",
                         "tools"]
    assert run("return __name__").value == "__main__"


def test_top_level_names_are_locals_and_closures():
    prog = "x = 5\ndef f():\n    return x * 2\nreturn f()"
    assert run(prog).value == 10
    prog = "def g():\n    global y\n    y = 3\ng()\nreturn globals()['y']"
    assert run(prog).value == 3


def test_process_view():
    """C25/C38/C126: file, cwd, TMPDIR, environment, argv, stdin."""
    prog = (
        "import os, sys\n"
        "f = sys.modules['__main__'].__file__\n"
        "env = dict(os.environ)\n"
        "env.pop('LC_CTYPE', None)\n"
        "return {'file': f, 'cwd': os.getcwd(), 'tmpdir': os.environ.get('TMPDIR'),\n"
        "        'keys': sorted(env), 'argv': sys.argv, 'stdin': sys.stdin.read(),\n"
        "        'path0': sys.path[0] if sys.path else None}\n")
    c = Child()
    d = os.path.realpath(c.dir)
    res = run(prog, child=c)
    v = res.value
    assert v["file"].endswith("/bootstrap.py")
    assert os.path.realpath(os.path.dirname(v["file"])) == d
    assert os.path.realpath(v["cwd"]) == d
    assert os.path.realpath(v["tmpdir"]) == d
    assert v["keys"] == ["TMPDIR"]
    assert v["argv"] == [v["file"]]
    assert v["stdin"] == ""
    assert os.path.realpath(v["path0"] or "") != d      # -I: script dir not on sys.path


def test_annotations_stay_live():
    """C127: no inherited __future__ flags."""
    assert run('def f(x: int):\n    pass\nreturn f.__annotations__["x"].__name__').value == "int"


def test_syntax_error():
    """C67."""
    err = run("$$invalid python$$").error
    assert err["kind"] == "exception"
    assert "SyntaxError" in err["message"]
    assert 'File "<program>"' in err["message"]
    assert err["exceptionType"] == "SyntaxError"
    assert err["line"] == 1
    assert "bootstrap" not in err["message"]


def test_illegal_in_function_body():
    for prog in ("from __future__ import annotations\nreturn 1", "from os import *"):
        err = run(prog).error
        assert err["kind"] == "exception"
        assert err["exceptionType"] == "SyntaxError"
    err = run("yield 1").error
    assert err["exceptionType"] == "TypeError"
    err = run("x = 1\0").error
    assert err["kind"] == "exception"


def test_raise_reports_type_and_line():
    """C68."""
    err = run("x = 1\nraise ValueError('intentional')").error
    assert "ValueError: intentional" in err["message"]
    assert err["exceptionType"] == "ValueError"
    assert err["line"] == 2
    assert err["message"].startswith("Traceback (most recent call last):\n")
    assert 'File "<program>", line 2, in __coderun_main__' in err["message"]


def test_base_exceptions_are_exceptions():
    for prog, name in (("raise SystemExit(3)", "SystemExit"),
                       ("raise KeyboardInterrupt", "KeyboardInterrupt"),
                       ("import asyncio\nraise asyncio.CancelledError()", "CancelledError"),
                       ("import sys\nsys.exit(0)", "SystemExit")):
        err = run(prog).error
        assert err["kind"] == "exception", prog
        assert err["exceptionType"] == name


def test_forged_second_boot_ack_is_harmless():
    """C18 (child side): a forged boot-ack does not disturb the run."""
    res = run('import os\nos.write(3, b\'{"type":"boot-ack"}\\n\')\nreturn "done"')
    assert res.value == "done"


def test_limits_applied_by_default():
    """C32 at the child level."""
    prog = ("import resource\n"
            "return {'cpu': list(resource.getrlimit(resource.RLIMIT_CPU)),\n"
            "        'as': list(resource.getrlimit(resource.RLIMIT_AS)),\n"
            "        'core': list(resource.getrlimit(resource.RLIMIT_CORE))}")
    v = run(prog, cpuSeconds=42, addressSpaceBytes=400 * MIB).value
    assert v == {"cpu": [42, 43], "as": [400 * MIB, 400 * MIB], "core": [0, 0]}


def test_non_boot_first_frame_exits_1():
    """docs/child-protocol-child.md §3.1 step 2: a broken daemon makes the bootstrap raise (exit 1, real stderr)."""
    c = Child()
    c.send({"type": "run", "program": "return 1"})
    res = c.serve()
    assert res.done is None and res.frames == []
    assert res.returncode == 1
    assert b"boot" in res.stderr


def test_eof_before_boot_exits_1():
    c = Child()
    c.sock.shutdown(1)
    res = c.serve()
    assert res.returncode == 1 and res.frames == []


def test_original_streams_flushed_before_done():
    """C183 (child side): buffered writes to sys.__stdout__/__stderr__ reach fds 1/2."""
    prog = ("import sys\n"
            "sys.__stdout__.reconfigure(write_through=False)\n"
            "sys.__stderr__.reconfigure(write_through=False)\n"
            "sys.__stdout__.write('orig stdout\\n')\n"
            "sys.__stderr__.write('orig stderr\\n')\n"
            "return 'done'")
    res = run(prog)
    assert res.value == "done"
    assert res.stdout == b"orig stdout\n" and res.stderr == b"orig stderr\n"
    assert res.logs == []


def test_native_writes_bypass_the_ledger():
    """docs/child-protocol-child.md §3.4: os.write(1|2) goes to the real fds (the daemon bills it, C182)."""
    res = run("import os\nos.write(1, b'stray stdout\\n')\nos.write(2, b'stray stderr\\n')")
    assert res.stdout == b"stray stdout\n" and res.stderr == b"stray stderr\n"
    assert res.logs == []
