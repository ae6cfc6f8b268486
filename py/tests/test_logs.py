"""stdout/stderr capture and the child's ledger (docs/child-protocol-wire.md §2.6, docs/child-protocol-child.md §3.4).

`res.logs` is what the daemon's ledger makes of the child's frames (conftest.DaemonLedger);
the frame-level assertions pin what the child itself sends and bills.
"""

import time

from conftest import run, MARKER, MIB


def texts(res):
    return [(f["text"], f.get("open", False)) for f in res.log_frames
            if not f.get("truncated")]


def truncations(res):
    return [f for f in res.log_frames if f.get("truncated")]


def only_one_marker_last(res):
    t = truncations(res)
    assert len(t) == 1
    assert res.log_frames[-1] is t[0]
    assert t[0] == {"type": "log", "text": MARKER(res_max(res)), "truncated": True}


def res_max(res):
    return int(res.log_frames[-1]["text"].split()[-2])


def test_print_coalesces_arguments():
    """C47, C48."""
    res = run('print("a", "b")\nprint("c")\nreturn None')
    assert res.value is None
    assert res.logs == ["a b", "c"]
    assert texts(res) == [("a b", False), ("c", False)]
    res = run('print("partial", end="")')
    assert res.logs == ["partial"]
    assert texts(res) == [("partial", True)]        # the settlement flush sends it open


def test_flush_makes_open_fragments():
    """C77 and docs/child-protocol-wire.md §2.6.5 examples (maxLogBytes 64)."""
    res = run("print('a', end='', flush=True)\nprint('b')", maxLogBytes=64)
    assert texts(res) == [("a", True), ("b", False)]
    assert res.logs == ["ab"]
    res = run("print('a' * 30, end='', flush=True)\nprint('b' * 25)", maxLogBytes=64)  # C85
    assert res.logs == ["a" * 30 + "b" * 25]
    res = run("print('a' * 30, end='', flush=True)\nprint('b' * 30)", maxLogBytes=64)  # C87
    assert res.logs == ["a" * 30 + "b" * 30]
    assert not truncations(res)
    res = run("print('x' * 40, end='', flush=True)\nprint('y' * 40)", maxLogBytes=64)  # C89
    assert res.logs == ["x" * 40, MARKER(64)]
    assert texts(res) == [("x" * 40, True)]
    only_one_marker_last(res)


def test_fragments_billed_once():
    """16 x print('x', end='', flush=True) then print('') -> ['x'*16], 19 bytes billed."""
    prog = "for _ in range(16):\n    print('x', end='', flush=True)\nprint('')"
    res = run(prog, maxLogBytes=64)
    assert res.logs == ["x" * 16]
    assert texts(res) == [("x", True)] * 16 + [("", False)]
    # 19 billed of 63: a 44-byte-cost line still fits afterwards, a 45-byte one would not
    prog += "\nprint('z' * 41)"
    assert run(prog, maxLogBytes=64).logs == ["x" * 16, "z" * 41]
    prog = prog.replace("41", "42")
    assert run(prog, maxLogBytes=64).logs == ["x" * 16, MARKER(64)]


def test_committed_prefix_before_marker():
    """C82."""
    res = run("print('committed', end='', flush=True)\nprint('x' * 100)", maxLogBytes=64)
    assert res.logs == ["committed", MARKER(64)]
    only_one_marker_last(res)


def test_tail_dropped_at_exactly_zero_is_reported():
    """docs/child-protocol-wire.md §2.6.5 and C162."""
    res = run('print("a" * 60 + "\\n" + "b" * 61, end="")', maxLogBytes=64)
    assert res.logs == ["a" * 60, MARKER(64)]
    res = run('print("y" * 100 + "\\n" + "z" * 10, end="")', maxLogBytes=104)
    assert res.logs == ["y" * 100, MARKER(104)]
    only_one_marker_last(res)


def test_line_budget_examples():
    """C135, C179, C164."""
    res = run('for _ in range(50):\n    print("aaaaaaaaaa")', maxLogBytes=128)
    assert res.logs == ["aaaaaaaaaa"] * 9 + [MARKER(128)]
    res = run("for _ in range(10000):\n    print()", maxLogBytes=64)
    assert res.logs == [""] * 21 + [MARKER(64)]
    assert len(res.log_frames) == 22
    res = run('for _ in range(500):\n    print("\\x00" * 10)', maxLogBytes=256)
    assert res.logs == ["\x00" * 10] * 4 + [MARKER(256)]


def test_empty_writes_cost_nothing():
    """C157."""
    prog = 'import sys\nfor _ in range(2_000_000):\n    sys.stdout.write("")\nreturn "done"'
    res = run(prog, maxLogBytes=256, addressSpaceBytes=256 * MIB, timeout=30)
    assert res.value == "done"
    assert res.logs == [] and res.log_frames == []


def test_newline_flood_in_one_write():
    """C158."""
    start = time.monotonic()
    res = run('print("x\\n" * 500000, end="")\nreturn "done"', maxLogBytes=256)
    assert res.value == "done"
    assert res.logs == ["x"] * 63 + [MARKER(256)]
    assert time.monotonic() - start < 8


def test_huge_writes_are_bounded_before_slicing():
    """C159, C160, C151: no second copy of a huge write (would not fit RLIMIT_AS)."""
    prog = 'import sys\nsys.stdout.write("\\n".rjust(340 * 1024 * 1024, "A"))\nreturn "done"'
    res = run(prog, maxLogBytes=256, addressSpaceBytes=400 * MIB, timeout=30)
    assert (res.value, res.logs) == ("done", [MARKER(256)])
    prog = prog.replace("import sys\n", "import sys\nsys.stdout.write('x')\n")
    res = run(prog, maxLogBytes=256, addressSpaceBytes=400 * MIB, timeout=30)
    assert (res.value, res.logs) == ("done", [MARKER(256)])
    res = run('print("x" * (100 * 1024 * 1024))\nreturn "done"', maxLogBytes=1024,
              addressSpaceBytes=256 * MIB, timeout=30)
    assert (res.value, res.logs) == ("done", [MARKER(1024)])
    only_one_marker_last(res)


def test_child_truncation_is_one_frame():
    """C152 (child side): the child's marker frame, and nothing after it."""
    res = run('import os\nprint("y" * 70000)\nprint("more")\nreturn "done"', maxLogBytes=64)
    assert res.value == "done"
    assert res.logs == [MARKER(64)]
    assert res.log_frames == [{"type": "log", "text": MARKER(64), "truncated": True}]


def test_control_heavy_line_is_billed_escaped():
    """C165: 24 MiB of NUL costs 6 bytes each and truncates."""
    res = run('print("\\x00" * (24 * 1024 * 1024))', maxLogBytes=33554432, timeout=30)
    assert res.logs == [MARKER(33554432)]


def test_logs_flushed_before_the_value_is_framed():
    """C166 (child side)."""
    prog = 'import sys\ns = "\\U0001F600" * 33_000_000\nsys.stdout.write(s)\nreturn s'
    res = run(prog, maxLogBytes=33554432, maxValueBytes=33554432, timeout=60)
    assert res.error == {"kind": "output-limit",
                         "message": "completion value exceeded 33554432 bytes"}
    assert res.logs == [MARKER(33554432)]


def test_stdout_and_stderr_share_the_ledger_and_merge():
    prog = ("import sys\n"
            "print('a', end='', flush=True)\n"
            "print('b', file=sys.stderr)\n"
            "sys.stderr.write('e1\\n')\n"
            "print('o1')")
    res = run(prog)
    assert res.logs == ["ab", "e1", "o1"]
    prog = "import sys\nfor i in range(30):\n    print('x' * 10, file=sys.stderr if i % 2 else sys.stdout)"
    res = run(prog, maxLogBytes=128)
    assert res.logs == ["x" * 10] * 9 + [MARKER(128)]


def test_lone_surrogate_prints_as_question_mark():
    res = run('print("a\\ud800b")\nprint("\\ud83d\\ude00")\nprint("é中😀")')
    assert res.logs == ["a?b", "😀", "é中😀"]


def test_many_fragments_coalesce():
    prog = "import sys\nfor _ in range(3000):\n    sys.stdout.write('a')\nsys.stdout.write('\\n')"
    res = run(prog)
    assert texts(res) == [("a" * 3000, False)]


def test_concurrent_threads_lose_nothing():
    prog = ("import threading\n"
            "def w(k):\n"
            "    for i in range(200):\n"
            "        print('thread-%d-line-%d' % (k, i))\n"
            "ts = [threading.Thread(target=w, args=(k,)) for k in range(4)]\n"
            "for t in ts: t.start()\n"
            "for t in ts: t.join()\n"
            "return 'ok'")
    res = run(prog, maxLogBytes=1048576)
    assert res.value == "ok"
    # print() writes text and "\n" separately, so threads may interleave between them (as
    # with a real TextIOWrapper); nothing is lost or duplicated.
    want = "".join("thread-%d-line-%d" % (k, i) for k in range(4) for i in range(200))
    assert sorted("".join(res.logs)) == sorted(want)
    assert len(res.logs) == 800


def test_thread_flooding_logs_does_not_corrupt_a_large_value():
    """C141."""
    prog = ("import threading, time\n"
            "def spam():\n"
            "    while True:\n"
            "        print('y' * 100)\n"
            "threading.Thread(target=spam, daemon=True).start()\n"
            "time.sleep(0.05)\n"
            "return 'x' * 307200")
    res = run(prog, maxValueBytes=1048576, maxLogBytes=4194304, timeout=30)
    assert res.value == "x" * 307200


def test_stream_surface():
    prog = ("import sys, io\n"
            "s = sys.stdout\n"
            "out = [s.isatty(), s.writable(), s.encoding, isinstance(s, io.TextIOBase),\n"
            "       hasattr(s, 'buffer'), sys.stdout is not sys.__stdout__]\n"
            "try:\n"
            "    s.fileno()\n"
            "    out.append('fileno')\n"
            "except (OSError, ValueError):\n"
            "    out.append('no fileno')\n"
            "try:\n"
            "    s.write(b'x')\n"
            "except TypeError as e:\n"
            "    out.append(str(e))\n"
            "s.writelines(['p', 'q\\n'])\n"
            "return out")
    res = run(prog)
    assert res.value == [False, True, "utf-8", True, False, True, "no fileno",
                         "write() argument must be str, not bytes"]
    assert res.logs == ["pq"]


def test_multi_line_write_is_batched_in_order():
    """One write() completing many lines (sent in 64 KiB batches) keeps order and tails."""
    prog = ('import sys\n'
            'sys.stdout.write("".join("l%d\\n" % i for i in range(20000)) + "tail")\n'
            'sys.stderr.write("e1\\ne2\\n")\n'
            'print("z")\n'
            'sys.stdout.write("a\\nb\\nc")\n'
            'sys.stdout.flush()\n'
            'return "done"')
    res = run(prog, maxLogBytes=1 << 20)
    assert res.value == "done"
    want = ["l%d" % i for i in range(20000)] + ["e1", "e2", "tailz", "a", "b", "c"]
    assert res.logs == want
    assert texts(res)[-3:] == [("a", False), ("b", False), ("c", True)]
