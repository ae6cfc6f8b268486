"""Hardening against the program (docs/child-protocol-child.md §3.7): rebinding __main__ globals and class attributes."""

import json

from conftest import run, ns, reply_ok, reply_err, HIJACK_PRELUDE, MARKER

TOOLS = [ns("tools", "echo", "fail")]


def wrap_or_fail(frame):
    if frame["name"] == "fail":
        return reply_err(frame, "nope")
    return reply_ok(frame, {"echoed": frame["args"]})


def test_hijack_prelude_breaks_nothing():
    """C40-C42, C73 generalised: every bootstrap global replaced by a raising stub."""
    prog = HIJACK_PRELUDE + (
        "print('still logging')\n"
        "try:\n"
        "    await tools.fail({})\n"
        "except RuntimeError as e:\n"
        "    caught = [type(e).__name__, e.args[0]]\n"
        "return [await tools.echo({'n': 1}), caught, 1.5, 'a\\ud800']")
    res = run(prog, wrap_or_fail, TOOLS)
    assert res.value == [{"echoed": {"n": 1}}, ["RuntimeError", "nope"], 1.5, "a\ud800"]
    assert res.logs == ["still logging"]


def test_hijack_prelude_then_raise():
    """C73, C75."""
    err = run(HIJACK_PRELUDE + "raise ValueError('x')").error
    assert err["kind"] == "exception" and err["message"].endswith("ValueError: x")
    prog = (HIJACK_PRELUDE + "import __main__\n__main__.BaseException = ValueError\n"
            "raise KeyError('k')")
    err = run(prog).error
    assert "KeyError" in err["message"] and err["exceptionType"] == "KeyError"


def test_rebinding_builtins_on_main():
    """C74, C42."""
    err = run("import __main__\n__main__.BaseException = RuntimeError\nraise ValueError('v')"
              ).error
    assert "ValueError: v" in err["message"]
    prog = ("import __main__\n"
            "__main__.RuntimeError = ValueError\n"
            "__main__.Exception = KeyError\n"
            "__main__.len = None\n"
            "__main__.type = None\n"
            "__main__.isinstance = None\n"
            "try:\n"
            "    await tools.fail({})\n"
            "except RuntimeError as e:\n"
            "    return [type(e).__name__, e.args[0], await tools.echo([1])]")
    assert run(prog, wrap_or_fail, TOOLS).value == ["RuntimeError", "nope", {"echoed": [1]}]


def test_error_class_survives_rebinding():
    """C94."""
    prog = ("import __main__\n"
            "def _boom(*a, **k):\n"
            "    raise RuntimeError('hijacked')\n"
            "__main__.Exception = ValueError\n"
            "__main__.setattr = _boom\n"
            "__main__.object = None\n"
            "try:\n"
            "    await tools.fail({})\n"
            "except ToolCallError as e:\n"
            "    return f'{type(e).__name__}:{e.toolName}'")
    res = run(prog, lambda f: reply_err(f, "x"),
              [ns("tools", "fail", error_class=("ToolCallError", "toolName"))])
    assert res.value == "ToolCallError:fail"


def test_closed_loop_reply_with_rebinding():
    """C144."""
    from test_bindings import CLOSED_LOOP, closed_loop_handler
    prog = "import __main__\n__main__.RuntimeError = ValueError\n" + CLOSED_LOOP
    res = run(prog, closed_loop_handler(), [ns("tools", "slow", "release")])
    assert res.value == "released"


def test_rebinding_stream_class_attributes():
    """Settlement flushes through closures, not through the class's methods."""
    prog = ("import sys\n"
            "print('pending', end='')\n"
            "cls = type(sys.stdout)\n"
            "def boom(*a, **k):\n"
            "    raise RuntimeError('hijacked')\n"
            "for name in ('write', 'flush', 'isatty', 'writable', 'close'):\n"
            "    setattr(cls, name, boom)\n"
            "    setattr(type(sys.stderr), name, boom)\n"
            "sys.stdout = sys.stderr = None\n"
            "return 'ok'")
    res = run(prog)
    assert res.value == "ok"
    assert res.logs == ["pending"]


def test_rebinding_proxy_and_error_class_attributes():
    prog = ("def boom(*a, **k):\n"
            "    raise RuntimeError('hijacked')\n"
            "cls = type(tools)\n"
            "for name in list(vars(cls)):\n"
            "    if not (name.startswith('__') and name.endswith('__')):\n"
            "        setattr(cls, name, boom)\n"
            "ToolError.tool = 'class attr'\n"
            "try:\n"
            "    await tools.fail({})\n"
            "except ToolError as e:\n"
            "    return [await tools.echo(1), e.tool, str(e)]")
    res = run(prog, wrap_or_fail, [ns("tools", "echo", "fail",
                                      error_class=("ToolError", "tool"))])
    assert res.value == [{"echoed": 1}, "fail", "nope"]


def test_forged_frames_do_not_disturb_the_child():
    """The program owns fd 3: forged frames are the daemon's business; the child goes on."""
    prog = ("import os\n"
            "os.write(3, b'not-json\\n{\"type\":\"unknown\"}\\n[]\\n')\n"
            "print('after')\n"
            "return await tools.echo('ok')")
    res = run(prog, wrap_or_fail, TOOLS)
    assert res.value == {"echoed": "ok"}
    assert res.logs == ["after"]


def test_done_survives_a_broken_stdout_flush():
    prog = ("import sys, io\n"
            "class Bad(io.TextIOBase):\n"
            "    def flush(self):\n"
            "        raise OSError('flush refused')\n"
            "    def write(self, s):\n"
            "        raise OSError('write refused')\n"
            "sys.__stdout__ = Bad()\n"
            "return 'ok'")
    assert run(prog).value == "ok"


def test_truncation_marker_frame_is_exact():
    res = run("print('x' * 200)", maxLogBytes=64)
    assert res.raw[1] == json.dumps({"type": "log", "text": MARKER(64), "truncated": True},
                                    separators=(",", ":")).encode()


def test_fallback_done_literal():
    """docs/child-protocol-child.md §3.6 item 5: when the done frame cannot be built, the fixed literal is written."""
    prog = ("import sys\n"
            "f = sys._getframe()\n"
            "while f.f_code.co_name != '_coderun_child':\n"
            "    f = f.f_back\n"
            "done_error = f.f_locals['done_error']\n"
            "def boom(*a, **k):\n"
            "    raise RuntimeError('no encoder')\n"
            "done_error.__closure__[done_error.__code__.co_freevars.index('string')]"
            ".cell_contents = boom\n"
            "raise ValueError('x')")
    res = run(prog)
    assert res.done_raw == b'{"type":"done","error":{"kind":"exception","message":"<unrenderable>"}}'


def test_no_late_global_lookups():
    """docs/child-protocol-child.md §3.7 statically: nested code (what runs after the program starts) reads no globals.

    Builtins and helpers are captured into closure cells by the factories; the only global
    reads left in nested scopes happen while the bootstrap is still booting.
    """
    import os
    import symtable
    from conftest import PY_DIR
    allowed = {("bootstrap.py", "property"),           # LogStream's class body, at boot
               ("protocol.py", "isinstance")}          # compile_program's helpers, at boot
    found = set()
    for name in ("bootstrap.py", "protocol.py"):
        with open(os.path.join(PY_DIR, name)) as f:
            table = symtable.symtable(f.read(), name, "exec")
        stack = [c for top in table.get_children() for c in top.get_children()]
        while stack:
            t = stack.pop()
            stack.extend(t.get_children())
            for s in t.get_symbols():
                if s.is_global() and s.is_referenced():
                    found.add((name, s.get_name()))
    assert found <= allowed, found - allowed
