"""Session mode (docs/child-protocol-sessions.md §6): one child, many runs, and forks of it.

The test plays the daemon: a session boot, then run frames carrying each run's budgets and
bindings, and fork frames with SCM_RIGHTS, exactly as the daemon sends them.
"""

import array
import ctypes
import json
import os
import select
import socket
import tempfile
import time

import pytest

from conftest import Child, MIB, ns, echo, loads
import protocol  # noqa: E402  (conftest puts py/ on the path)

TOOLS = [ns("tools", "echo")]
PR_SET_CHILD_SUBREAPER = 36


class Session:
    """A session child: booted with session true, then any number of runs."""

    def __init__(self, cpuSeconds=60, addressSpaceBytes=512 * MIB, child=None):
        self.c = child or Child()
        self.c.boot(cpuSeconds=cpuSeconds, addressSpaceBytes=addressSpaceBytes, session=True)
        ack = self.c.read_line(time.monotonic() + 20)
        assert loads(ack) == {"type": "boot-ack"}, ack

    def run(self, program, handler=echo, namespaces=(), cpuSeconds=10, maxLogBytes=65536,
            maxValueBytes=32768, timeout=20):
        self.c.max_log, self.c.max_value = maxLogBytes, maxValueBytes
        frame = {"type": "run", "program": program, "cpuSeconds": cpuSeconds,
                 "maxLogBytes": maxLogBytes, "maxValueBytes": maxValueBytes}
        if namespaces:
            frame["namespaces"] = list(namespaces)
        self.c.send(frame)
        res = self.c.serve(handler, timeout=timeout, keep=True)
        assert res.done is not None, "no done frame: %r" % (self.c._stderr_peek(),)
        return res

    def quiet_for(self, seconds):
        """Nothing arrives on fd 3 for that long (the child is idle)."""
        self.c.sock.settimeout(seconds)
        try:
            data = self.c.sock.recv(1 << 16)
        except socket.timeout:
            return
        raise AssertionError("the idle child sent %r" % data)

    def close(self):
        self.c.close()


@pytest.fixture
def session():
    s = Session()
    yield s
    s.close()


def test_top_level_names_persist(session):
    session.run(
        "import json as j, os.path\n"
        "from math import pi as PI\n"
        "x = 1\n"
        "y: int = 2\n"
        "a, (b, *c) = 1, (2, 3, 4)\n"
        "def f(n):\n"
        "    return n + x\n"
        "class K:\n"
        "    v = 7\n"
        "for i in range(3):\n"
        "    pass\n"
        "with open('/dev/null') as fh:\n"
        "    pass\n"
        "if (w := 5):\n"
        "    pass\n"
        "[q for q in range(2) if (last := q) >= 0]\n"
        "try:\n"
        "    1 / 0\n"
        "except ZeroDivisionError as err:\n"
        "    kept = str(err)\n"
        "match {'k': 1}:\n"
        "    case {'k': cap}:\n"
        "        pass\n"
        "gone = 1\n"
        "del gone\n")
    res = session.run(
        "x += 1\n"
        "try:\n"
        "    gone\n"
        "    still = True\n"
        "except NameError:\n"
        "    still = False\n"
        "return [j.dumps(1), os.path.sep, PI > 3, x, y, a, b, c, f(1), K.v, i, fh.closed, w,\n"
        "        last, kept, cap, still, 'q' in globals()]")
    assert res.value == ["1", "/", True, 2, 2, 1, 2, [3, 4], 3, 7, 2, True, 5, 1,
                         "division by zero", 1, False, False]


NO_WALRUS = (
    "import json as j, os.path\n"
    "from math import pi as PI\n"
    "x = y = 1\n"
    "z: int = 2\n"
    "bare: int\n"
    "o = type('O', (), {})()\n"
    "o.attr: int = 3\n"
    "a, (b, *c) = 1, (2, 3, 4)\n"
    "@(lambda fn: fn)\n"
    "def f(n=[d for d in range(2)]):\n"
    "    inner = n\n"
    "    return inner\n"
    "class K:\n"
    "    v = 7\n"
    "for i, [k, *_rest] in [(0, [1, 2])]:\n"
    "    while False:\n"
    "        never = 1\n"
    "    else:\n"
    "        t2: int = 4\n"
    "with open('/dev/null') as fh, open('/dev/null') as (gh):\n"
    "    pass\n"
    "try:\n"
    "    1 / 0\n"
    "except ZeroDivisionError as err:\n"
    "    kept = str(err)\n"
    "finally:\n"
    "    fin = 1\n"
    "match {'k': [1, 2], 'r': 3}:\n"
    "    case {'k': [first, *more], **others} if first:\n"
    "        pass\n"
    "    case K(v=vv) | K(v=vv):\n"
    "        pass\n"
    "gone = 1\n"
    "del gone, o.attr\n"
    "sq = [q for q in range(2)]\n")


def test_statement_walk_agrees_with_the_full_walk():
    # Without `:=` only statements and targets are walked: the same names, the same rewrite.
    import _ast
    import ast
    for src in (NO_WALRUS, "return 1", "", "x[0] = 1\nreturn x", "global g\ng = 1",
                "from os import *"):
        fast = compile(src, "<program>", "exec", _ast.PyCF_ONLY_AST)
        full = compile(src, "<program>", "exec", _ast.PyCF_ONLY_AST)
        assert protocol.top_level_names(_ast, fast.body, src) == \
            protocol.top_level_names(_ast, full.body)
        assert ast.dump(fast) == ast.dump(full)
    body = compile(NO_WALRUS, "<program>", "exec", _ast.PyCF_ONLY_AST).body
    assert protocol.top_level_names(_ast, body, NO_WALRUS) == {
        "j", "os", "PI", "x", "y", "z", "o", "a", "b", "c", "f", "K", "i", "k", "_rest",
        "never", "t2", "fh", "gh", "err", "kept", "fin", "first", "more", "others", "vv", "gone",
        "sq"}


WALRUS = (
    "if (w := 5):\n"
    "    pass\n"
    "[q for q in range(2) if (last := q) >= 0]\n"
    "@(dec := (lambda fn: fn))\n"
    "def f(a=(dflt := 1), *, b=(kwd := 2)):\n"
    "    inner = (hidden := 3)\n"
    "class C((base := object), metaclass=(meta := type)):\n"
    "    body = (classy := 4)\n"
    "g = lambda v=(ldef := 5): (lbody := v)\n"
    "d = {}\n"
    "d[(key := 'k')] = 6\n"
    "with (ctx := open('/dev/null')):\n"
    "    pass\n"
    "match 1:\n"
    "    case 1 if (guard := True):\n"
    "        pass\n"
    "print((arg := 7))\n"
    "x = [[(deep := y) for y in range(2)] for _ in range(1)]\n")


def test_walrus_targets_are_found_where_they_bind_the_top_level():
    # In conditions, comprehensions (at any depth), decorators, defaults, bases, keywords,
    # lambda defaults, subscripts, with items, match guards and call arguments; not in a
    # function's, a class's or a lambda's body.
    import _ast
    body = compile(WALRUS, "<program>", "exec", _ast.PyCF_ONLY_AST).body
    assert protocol.top_level_names(_ast, body, WALRUS) == {
        "w", "last", "dec", "f", "dflt", "kwd", "C", "base", "meta", "g", "ldef", "d", "key",
        "ctx", "guard", "arg", "x", "deep"}


def test_top_level_names_persist_without_walrus(session):
    session.run(NO_WALRUS)
    res = session.run(
        "return [j.dumps(1), os.path.sep, PI > 3, x, y, z, a, b, c, f(), K.v, i, k, _rest,\n"
        "        t2, fh.closed, gh.closed, kept, fin, first, more, others, sq,\n"
        "        [n in globals() for n in ('bare', 'gone', 'never', 'vv', 'inner', 'd', 'q')]]")
    assert res.value == ["1", "/", True, 1, 1, 2, 1, 2, [3, 4], [0, 1], 7, 0, 1, [2], 4,
                         True, True, "division by zero", 1, 1, [2], {"r": 3}, [0, 1],
                         [False] * 7]


def test_return_and_traceback_lines(session):
    assert session.run("return 1").value == 1
    session.run("def boom():\n    raise ValueError('from run 2')\n")
    err = session.run("x = 1\n\nboom()").error
    assert err["kind"] == "exception" and err["line"] == 2, err  # the innermost frame
    assert 'File "<program>", line 3, in __coderun_main__' in err["message"]
    assert 'line 2, in boom' in err["message"]
    assert "bootstrap" not in err["message"]


def test_bindings_are_per_run_and_old_ones_are_dead(session):
    res = session.run("saved = tools.echo\nreturn await tools.echo(1)", namespaces=TOOLS)
    assert res.value == 1 and [c["id"] for c in res.calls] == [0]
    res = session.run(
        "try:\n"
        "    saved(2)\n"
        "except RuntimeError as e:\n"
        "    dead = str(e)\n"
        "return [dead, await tools.echo(3)]", namespaces=TOOLS)
    assert res.value == ["tools.echo belongs to a finished run", 3]
    assert [c["id"] for c in res.calls] == [0]
    res = session.run("try:\n    tools\nexcept NameError:\n    return 'none'\nreturn 'left'")
    assert res.value == "left"  # a name the program kept is its own; calling it fails
    res = session.run("try:\n    await tools.echo(1)\nexcept RuntimeError as e:\n    return str(e)")
    assert res.value == "tools.echo belongs to a finished run"


def test_deleting_bindings_or_rebinding_print_breaks_nothing(session):
    session.run("del tools\nimport sys\nsys.stdout = None\nsys.stderr = None\n"
                "def print(*a, **k):\n    raise RuntimeError('mine')\n", namespaces=TOOLS)
    res = session.run("del print\nprint('back')\nreturn await tools.echo('ok')",
                      namespaces=TOOLS)
    assert res.value == "ok" and res.logs == ["back"]


def test_budgets_are_per_run(session):
    res = session.run("print('x' * 100)", maxLogBytes=64)
    assert res.logs[-1].endswith("64 bytes")
    res = session.run("print('x' * 100)\nreturn 'y' * 50", maxLogBytes=4096, maxValueBytes=60)
    assert res.logs == ["x" * 100] and res.value == "y" * 50
    assert session.run("return 'y' * 50", maxValueBytes=40).error["kind"] == "output-limit"


LIMITS = ("import resource\n"
          "a = resource.getrusage(resource.RUSAGE_SELF)\n"
          "b = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
          "used = a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime\n"
          "return list(resource.getrlimit(resource.RLIMIT_CPU)) + [used]")


def assert_moved(limits, budget, hard):
    """soft = the CPU used before the run, rounded up, plus the run's budget."""
    soft, got_hard, used = limits
    assert got_hard == hard and used - 0.3 <= soft - budget <= -int(-used // 1), limits


def test_cpu_soft_limit_moves_before_each_run():
    s = Session(cpuSeconds=100)
    try:
        assert_moved(s.run(LIMITS, cpuSeconds=3).value, 3, 101)
        s.run("import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2:\n"
              "    pass\n", cpuSeconds=5)
        limits = s.run(LIMITS, cpuSeconds=2).value
        assert_moved(limits, 2, 101)
        assert limits[0] >= 4
        with pytest.raises(AssertionError, match="no done frame"):
            s.run("while True:\n    pass", cpuSeconds=1, timeout=30)
        assert s.c.proc.wait(10) in (-9, -24)  # SIGKILL or SIGXCPU, within the run's budget
    finally:
        s.close()


def test_a_left_thread_stays_quiet_while_idle(session):
    session.run(
        "import threading, time\n"
        "def chatter():\n"
        "    while True:\n"
        "        print('tick')\n"
        "        try:\n"
        "            tools.echo(1)\n"
        "        except RuntimeError:\n"
        "            pass\n"
        "        time.sleep(0.01)\n"
        "threading.Thread(target=chatter, daemon=True).start()\n"
        "time.sleep(0.05)", namespaces=TOOLS)
    session.quiet_for(0.3)
    assert session.run("return await tools.echo(2)", namespaces=TOOLS).value == 2


def test_a_forked_grandchild_never_speaks(session):
    res = session.run(
        "import os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(0.2)\n"
        "    print('grandchild')\n"
        "    return 'grandchild'\n"
        "return 'parent'")
    assert res.value == "parent"
    session.quiet_for(0.5)
    assert session.run("return pid > 0").value is True


def test_eof_ends_the_idle_child(session):
    session.run("x = 1")
    session.c.sock.shutdown(socket.SHUT_WR)
    session.c.wsock.shutdown(socket.SHUT_WR)
    assert session.c.proc.wait(10) == 0


# ---- fork ------------------------------------------------------------------------------------

@pytest.fixture
def subreaper():
    """This process adopts orphans while the test runs, as the fork server does."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


class Fork:
    """The daemon's side of one fork: the new channel and pipes."""

    def __init__(self, source, dir_):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        frame = json.dumps({"type": "fork", "dir": dir_}).encode() + b"\n"
        source.c.wsock.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                          array.array("i", [out_w, err_w, theirs.fileno()]))])
        for fd in (out_w, err_w):
            os.close(fd)
        theirs.close()
        self.out, self.err = out_r, err_r
        self.sock.settimeout(20)
        self.buf = b""
        self.pid = None

    def reply(self):
        while b"\n" not in self.buf:
            data = self.sock.recv(1 << 16)
            if not data:
                return None
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def as_child(self):
        """A Child-like view of the fork for Session.run (its socket is the new channel)."""
        c = Child.__new__(Child)
        c.sock = self.sock
        c.wsock = self.sock
        c.buf = self.buf
        c.outq = _Direct(self.sock)
        c.max_log, c.max_value = 65536, 32768
        c.proc = None
        return c

    def close(self):
        self.sock.close()
        for fd in (self.out, self.err):
            os.close(fd)
        if self.pid is not None:
            os.waitpid(self.pid, 0)


class _Direct:
    """Frames go out at once (the fork's tests never write while the child writes)."""

    def __init__(self, sock):
        self.sock = sock

    def put(self, data):
        self.sock.sendall(data)


class ForkSession(Session):
    def __init__(self, fork):
        self.c = fork.as_child()


def test_fork_copies_state_and_diverges(session, subreaper):
    session.run("data = list(range(100000))\nmarker = 'source'")
    dir_ = tempfile.mkdtemp(prefix="coderun-")
    f = Fork(session, dir_)
    try:
        reply = f.reply()
        assert reply["type"] == "forked", reply
        f.pid = reply["pid"]
        assert os.waitid(os.P_PID, f.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        fs = ForkSession(f)
        res = fs.run("import os\nos.write(1, b'out')\nmarker = 'fork'\n"
                     "return [len(data), os.getcwd(), os.getpid(), os.getsid(0) == os.getpid()]")
        assert res.value == [100000, os.path.realpath(dir_), f.pid, True]
        assert os.read(f.out, 10) == b"out"
        assert session.run("return [marker, len(data)]").value == ["source", 100000]
        assert fs.run("return marker").value == "fork"
        fds = os.listdir("/proc/%d/fd" % f.pid)
        assert sorted(int(x) for x in fds) == [0, 1, 2, 3], fds
    finally:
        f.close()
        os.rmdir(dir_)
    assert session.run("return 'alive'").value == "alive"


def test_fork_into_a_missing_dir_fails_on_the_new_channel(session, subreaper):
    f = Fork(session, "/nonexistent/coderun-dir")
    try:
        reply = f.reply()
        assert reply["type"] == "fork-failed" and "nonexistent" in reply["message"], reply
        assert f.reply() is None            # then the channel ends
    finally:
        f.close()
    assert session.run("return 1").value == 1


def test_fork_frame_during_a_run_is_ignored(session):
    def handler(frame):
        if frame["args"] == "fork now":
            holder.append(Fork(session, "/tmp"))
        return echo(frame)
    holder = []
    res = session.run("return await tools.echo('fork now')", handler, namespaces=TOOLS)
    assert res.value == "fork now"
    f = holder[0]
    try:
        assert f.reply() is None            # the descriptors were dropped, unread
        r, _, _ = select.select([f.out], [], [], 5)
        assert r and os.read(f.out, 10) == b""
    finally:
        f.close()
    session.quiet_for(0.2)
    assert session.run("return 2").value == 2


def test_fork_keeps_the_limits(session, subreaper):
    session.run("x = 1")
    f = Fork(session, "/tmp")
    try:
        f.pid = f.reply()["pid"]
        fs = ForkSession(f)
        assert_moved(fs.run(LIMITS, cpuSeconds=2).value, 2, 61)  # its own CPU, from zero
        res = fs.run("import resource\nreturn list(resource.getrlimit(resource.RLIMIT_AS))")
        assert res.value == [512 * MIB, 512 * MIB]
    finally:
        f.close()



def test_fork_with_a_left_thread_takes_the_double_fork(session, subreaper):
    """A source with another thread is not cloned raw (a libc lock might be held): the
    double fork gives the same fork, reparented to the subreaper; the child's own locks,
    which that thread may hold, are new in the fork."""
    # White-box: a thread holds the log ledger's lock across the fork, for good.
    session.run("import sys, threading, time\n"
                "cells = type(sys.stdout).write.__closure__\n"
                "lock = [c.cell_contents for c in cells\n"
                "        if type(c.cell_contents).__name__ == 'RLock'][0]\n"
                "def hold():\n"
                "    time.sleep(0.2)\n"          # once the run is over
                "    with lock:\n"
                "        time.sleep(60)\n"
                "threading.Thread(target=hold, daemon=True).start()\n"
                "x = 'kept'")
    time.sleep(0.5)
    f = Fork(session, "/tmp")
    try:
        reply = f.reply()
        assert reply["type"] == "forked", reply
        f.pid = reply["pid"]
        res = ForkSession(f).run("import threading\nprint('fork')\n"
                                 "return [x, threading.active_count()]")
        assert res.value == ["kept", 1] and res.logs == ["fork"]
    finally:
        f.close()
