"""Diagnostics: filtered tracebacks, chains, groups, fallbacks, caps (docs/child-protocol-child.md §3.6 item 2, docs/child-protocol-child.md §3.6 item 3)."""

import json
import time

from conftest import run, ns, reply_err, CHAIN, TRUNC


def wire_len(s):
    return len(json.dumps(s, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def test_only_program_frames():
    prog = ("def inner():\n"
            "    raise ValueError('deep')\n"
            "def outer():\n"
            "    inner()\n"
            "outer()")
    err = run(prog).error
    assert err["message"] == (
        "Traceback (most recent call last):\n"
        '  File "<program>", line 5, in __coderun_main__\n'
        '  File "<program>", line 4, in outer\n'
        '  File "<program>", line 2, in inner\n'
        "ValueError: deep")
    assert err["line"] == 2
    assert err["exceptionType"] == "ValueError"


def test_frames_inside_library_code_are_dropped():
    err = run("import json\njson.loads('{bad')").error
    assert err["message"].startswith("Traceback (most recent call last):\n"
                                     '  File "<program>", line 2, in __coderun_main__\n')
    assert err["exceptionType"] == "JSONDecodeError"
    assert err["message"].splitlines()[-1].startswith("json.decoder.JSONDecodeError: ")
    assert err["line"] == 2


def test_context_and_cause_chains():
    prog = ("try:\n"
            "    1 / 0\n"
            "except ZeroDivisionError:\n"
            "    raise KeyError('k')")
    msg = run(prog).error["message"]
    assert "ZeroDivisionError: division by zero\n\nDuring handling of the above exception, " \
           "another exception occurred:\n\n" in msg
    assert msg.endswith("KeyError: 'k'")
    prog = ("try:\n"
            "    1 / 0\n"
            "except ZeroDivisionError as e:\n"
            "    raise KeyError('k') from None")
    msg = run(prog).error["message"]
    assert "ZeroDivision" not in msg


def test_binding_rejection_shows_only_program_frames():
    """C91."""
    err = run("await tools.boom({})", lambda f: reply_err(f, "exploded"),
              [ns("tools", "boom")]).error
    assert "exploded" in err["message"] and "<program>" in err["message"]
    assert "bootstrap" not in err["message"] and "protocol.py" not in err["message"]
    assert err["exceptionType"] == "RuntimeError"
    assert err["line"] == 1
    assert err["message"].endswith("RuntimeError: exploded")
    assert "During handling" not in err["message"]


def test_exception_group_members():
    """C140."""
    prog = ("import asyncio\n"
            "async def boom():\n"
            "    raise ValueError('member failure')\n"
            "async with asyncio.TaskGroup() as tg:\n"
            "    tg.create_task(boom())")
    err = run(prog).error
    assert "<program>" in err["message"] and "member failure" in err["message"]
    assert "bootstrap" not in err["message"]
    assert err["exceptionType"] == "ExceptionGroup"
    assert 'File "<program>", line 3, in boom' in err["message"]


def test_nested_groups_and_chain_cap():
    prog = ("e = ValueError('leaf')\n"
            "for i in range(300):\n"
            "    e = ExceptionGroup('level %d' % i, [e])\n"
            "raise e")
    msg = run(prog, maxValueBytes=1 << 20).error["message"]
    assert msg.endswith(CHAIN)
    assert "level 299" in msg and "level 0 " not in msg


def test_deep_cause_chain_is_bounded():
    """C69."""
    prog = ("err = None\n"
            "for i in range(3000):\n"
            "    try:\n"
            "        if err is None:\n"
            "            raise ValueError(i)\n"
            "        raise ValueError(i) from err\n"
            "    except ValueError as e:\n"
            "        err = e\n"
            "raise err")
    start = time.monotonic()
    err = run(prog, maxValueBytes=1048576, timeout=30).error
    assert time.monotonic() - start < 15
    msg = err["message"]
    assert msg.endswith(CHAIN)
    assert msg.count("ValueError: ") == 100
    assert "ValueError: 2999" in msg and "ValueError: 2899\n" not in msg


def test_cyclic_context_terminates():
    prog = ("a = ValueError('a')\n"
            "b = KeyError('b')\n"
            "a.__context__ = b\n"
            "b.__context__ = a\n"
            "raise a")
    msg = run(prog).error["message"]
    assert "ValueError: a" in msg


def test_recursion_error_is_collapsed():
    prog = "def f(n):\n    return f(n + 1)\nf(0)"
    err = run(prog, maxValueBytes=1 << 20).error
    assert err["exceptionType"] == "RecursionError"
    assert "[Previous line repeated" in err["message"]
    assert err["line"] == 2


def test_hostile_str_and_repr():
    """C70."""
    prog = ("class Unprintable(Exception):\n"
            "    def __str__(self):\n"
            "        raise RuntimeError('str refused')\n"
            "    def __repr__(self):\n"
            "        raise RuntimeError('repr refused')\n"
            "raise Unprintable()")
    err = run(prog).error
    assert "Unprintable" in err["message"]
    assert "str refused" not in err["message"] and "repr refused" not in err["message"]
    assert err["exceptionType"] == "Unprintable"


def test_hostile_metaclass_module():
    """C71, C72."""
    prog = ("class Meta(type):\n"
            "    @property\n"
            "    def __module__(cls):\n"
            "        raise RuntimeError('module refused')\n"
            "class Hostile(Exception, metaclass=Meta):\n"
            "    pass\n"
            "raise Hostile('original failure')")
    err = run(prog).error
    assert err["message"] == "Hostile: <diagnostic rendering failed>"
    assert err["kind"] == "exception"
    prog2 = prog.replace("class Hostile", "    @property\n    def __name__(cls):\n"
                         "        raise RuntimeError('name refused')\nclass Hostile")
    err = run(prog2).error
    assert err["message"] == "<unknown>: <diagnostic rendering failed>"
    assert "exceptionType" not in err


def test_long_class_name_is_cut():
    prog = "E = type('N' * 500, (Exception,), {'__module__': property(lambda s: 1/0)})\n" \
           "class M(type):\n" \
           "    @property\n" \
           "    def __module__(cls):\n" \
           "        raise RuntimeError()\n" \
           "raise M('N' * 500, (Exception,), {})()"
    err = run(prog).error
    assert err["message"] == "N" * 200 + ": <diagnostic rendering failed>"
    assert err["exceptionType"] == "N" * 200


def test_huge_diagnostics_are_capped():
    """C155, C156, C188, C189 (child side)."""
    err = run('raise ValueError("boom-" + "x" * (8 * 1024 * 1024))', maxValueBytes=1024).error
    assert "boom-" in err["message"] and err["message"].endswith(TRUNC)
    assert wire_len(err["message"]) <= 1024
    err = run('raise ValueError("\\x00" * (512 * 1024))', maxValueBytes=4096).error
    assert err["message"].endswith(TRUNC)
    assert wire_len(err["message"]) <= 4096
    err = run('raise ValueError("R" * 100000)', maxValueBytes=40).error
    assert err["message"].endswith(TRUNC) and wire_len(err["message"]) <= 40
    err = run('raise ValueError("R" * 500)', maxValueBytes=4).error
    assert err["message"] == TRUNC


def test_syntax_error_rendering():
    err = run("x = (1,\ny = 2").error
    assert err["kind"] == "exception"
    assert err["exceptionType"] == "SyntaxError"
    assert err["message"].startswith('  File "<program>", line ')
    err = run("def f():\n  return 1\n   x = 2").error
    assert err["exceptionType"] == "IndentationError"
    assert err["line"] == 3


def test_syntax_error_without_a_line_has_no_location():
    """As CPython's exception-only rendering: no invented file or "line None"."""
    err = run("x = 1\0").error
    assert err["message"] == "SyntaxError: source code string cannot contain null bytes"
    assert "line" not in err
    err = run("raise SyntaxError('custom')").error
    assert err["message"] == ("Traceback (most recent call last):\n"
                              '  File "<program>", line 1, in __coderun_main__\n'
                              "SyntaxError: custom")
    err = run("raise SyntaxError('m', ('f.py', None, None, None))").error
    assert err["message"].endswith("\nSyntaxError: m (f.py)")


def test_notes_are_rendered():
    prog = "e = ValueError('v')\ne.add_note('a note')\nraise e"
    assert run(prog).error["message"].endswith("ValueError: v\na note")


def test_no_line_without_program_frames():
    prog = "import asyncio\nraise asyncio.CancelledError()"
    err = run(prog).error
    assert err["line"] == 2
    # an exception created by the bootstrap path only (awaiting an async generator)
    err = run("yield 1").error
    assert err["exceptionType"] == "TypeError"
    assert "line" not in err
    assert "bootstrap" not in err["message"]
