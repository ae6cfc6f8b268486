"""Test harness: stage bootstrap.py + protocol.py and play the daemon on fd 3.

`Child` spawns `PYTHON -u -I <dir>/bootstrap.py` exactly as the daemon does (fd 3 =
one end of an AF_UNIX socketpair, fd 0 = /dev/null, fds 1/2 = pipes, environment TMPDIR only,
working directory = the staged directory, a new session). Every read has a deadline, so a
misbehaving child fails a test instead of hanging it.
"""

import json
import os
import queue
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

# The interpreter the daemon would run. Under a virtual environment (make test
# runs pytest from .venv) sys.executable is the venv's launcher, whose start-up
# differs from the real interpreter's; the daemon resolves shims to the real
# binary, and so do these tests.
PYTHON = getattr(sys, "_base_executable", None) or sys.executable

PY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PY_DIR)
import protocol  # noqa: E402
from tmphygiene import nothing_left_in_tmp, own_tmpdir  # noqa: E402,F401 (fixtures)

MIB = 1048576
MARKER = protocol.log_truncation_marker
CHAIN = protocol.CHAIN_MARKER
TRUNC = protocol.MESSAGE_MARKER

HIJACK_PRELUDE = """\
import sys as _sys
def _hijacked(*_args, **_kwargs):
    raise RuntimeError("hijacked")
_boot = _sys.modules["__main__"]
for _name in list(vars(_boot)):
    if not (_name.startswith("__") and _name.endswith("__")):
        setattr(_boot, _name, _hijacked)
"""


def json_cost(text):
    """Serialized JSON string cost of a WTF-8-ish Python str (lone surrogate = 6)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) + \
        3 * sum(1 for ch in text if "\ud800" <= ch <= "\udfff")


class DaemonLedger:
    """The daemon's log ledger (docs/child-protocol-wire.md §2.6.2), to turn log frames into `logs`."""

    def __init__(self, max_log):
        self.max_log = max_log
        self.remaining = max_log - 1
        self.entries = []
        self.hold = None
        self.truncated = False

    def _truncate(self):
        if not self.truncated:
            self.hold = None
            self.entries.append(MARKER(self.max_log))
            self.truncated = True

    def log(self, frame):
        if frame.get("truncated") is True:
            self._truncate()
            return
        if self.truncated:
            return
        text = frame["text"]
        cost = json_cost(text)
        if frame.get("open") is True:
            if self.hold is None:
                if cost + 1 > self.remaining:
                    return self._truncate()
                self.remaining -= cost + 1
                if text:
                    self.hold = len(self.entries)
                    self.entries.append(text)
            else:
                if cost - 2 > self.remaining:
                    return self._truncate()
                self.remaining -= cost - 2
                self.entries[self.hold] += text
        elif self.hold is not None:
            if cost - 2 > self.remaining:
                return self._truncate()
            self.remaining -= cost - 2
            self.entries[self.hold] += text
            self.hold = None
        else:
            if cost + 1 > self.remaining:
                return self._truncate()
            self.remaining -= cost + 1
            self.entries.append(text)


class Result:
    def __init__(self):
        self.frames = []        # every child frame, decoded, in order
        self.raw = []           # the raw lines
        self.calls = []
        self.done = None
        self.done_raw = None
        self.logs = []
        self.log_frames = []
        self.outputs = []       # output frames (display)
        self.returncode = None
        self.signal = None
        self.stdout = b""
        self.stderr = b""

    @property
    def ok(self):
        return self.done is not None and "error" not in self.done

    @property
    def value(self):
        assert self.done is not None, "no done frame"
        assert "error" not in self.done, self.done.get("error")
        return self.done["value"]

    @property
    def error(self):
        assert self.done is not None, "no done frame"
        assert "error" in self.done, "expected an error, got %r" % (self.done,)
        return self.done["error"]

    @property
    def raw_value(self):
        prefix = b'{"type": "done", "value": '
        assert self.done_raw.startswith(prefix), self.done_raw[:80]
        return self.done_raw[len(prefix):-1]


def loads(line):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 40000))
    try:
        return json.loads(line)
    finally:
        sys.setrecursionlimit(old)


class Child:
    """One bootstrap child with the test acting as the daemon."""

    def __init__(self, rlimits=None, sigxcpu_ignored=False, sigxcpu_blocked=False):
        self.dir = tempfile.mkdtemp(prefix="coderun-")
        for name in ("bootstrap.py", "protocol.py"):
            shutil.copyfile(os.path.join(PY_DIR, name), os.path.join(self.dir, name))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fd = theirs.fileno()

        def pre():
            os.dup2(fd, 3)
            for which, value in (rlimits or {}).items():
                resource.setrlimit(which, value)
            if sigxcpu_ignored:
                signal.signal(signal.SIGXCPU, signal.SIG_IGN)
            if sigxcpu_blocked:
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGXCPU})

        self.proc = subprocess.Popen(
            [PYTHON, "-u", "-I", os.path.join(self.dir, "bootstrap.py")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=self.dir, env={"TMPDIR": self.dir}, close_fds=False, preexec_fn=pre,
            start_new_session=True)
        theirs.close()
        self.sock = ours
        # A second socket object on the same connection for writes: a socket's timeout is
        # per object, and reads change theirs while a background thread may be writing.
        self.wsock = socket.socket(fileno=os.dup(ours.fileno()))
        self.wsock.settimeout(60)
        self.sock.settimeout(60)
        self.outq = queue.Queue()
        self.write_error = None
        threading.Thread(target=self._writer, daemon=True).start()
        self.buf = b""
        self.max_log = 65536
        self.max_value = 32768

    # -- raw I/O ----------------------------------------------------------------------
    def send(self, obj):
        """Queue one frame (dict, or raw bytes without the newline) for the writer thread.

        The reader never blocks on a write, so a child that writes while we answer it can
        never deadlock the harness (the daemon's reply writer is asynchronous too).
        """
        if isinstance(obj, (bytes, bytearray)):
            data = bytes(obj)
        else:
            # like the daemon: non-ASCII raw, a lone surrogate as its \udxxx escape
            data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode(
                "utf-8", "backslashreplace")
        self.outq.put(data + b"\n")

    def send_in_background(self, frames):
        for f in frames:
            self.send(f)

    def _writer(self):
        while True:
            data = self.outq.get()
            if data is None:
                return
            try:
                self.wsock.sendall(data)
            except OSError as e:
                self.write_error = e
                return

    def read_line(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame from the child in time; stderr: %r"
                                   % self._stderr_peek())
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            if not data:
                return None
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def _stderr_peek(self):
        if self.proc.poll() is not None:
            return self.proc.stderr.read()[-2000:]
        return b"(child still running)"

    # -- the exchange -------------------------------------------------------------------
    def boot(self, cpuSeconds=60, addressSpaceBytes=512 * MIB, maxLogBytes=65536,
             maxValueBytes=32768, namespaces=(), maxOutputBytes=8 * MIB, session=False):
        self.max_log = maxLogBytes
        self.max_value = maxValueBytes
        frame = {"type": "boot", "cpuSeconds": cpuSeconds,
                 "addressSpaceBytes": addressSpaceBytes, "maxLogBytes": maxLogBytes,
                 "maxValueBytes": maxValueBytes, "maxOutputBytes": maxOutputBytes,
                 "namespaces": list(namespaces)}
        if session:
            frame["session"] = True
        self.send(frame)

    def serve(self, handler=None, timeout=20, program=None, expect_ack=True, keep=False):
        """Read frames until done (or EOF); answer boot-ack with run, calls via handler.
        keep: leave the child running afterwards (a session child goes back to idle)."""
        res = Result()
        ledger = DaemonLedger(self.max_log)
        deadline = time.monotonic() + timeout
        acked = False
        while True:
            line = self.read_line(deadline)
            if line is None:
                break
            if not line:
                continue
            res.raw.append(line)
            try:
                frame = loads(line)
            except ValueError:
                continue            # junk is dropped, as the daemon does
            if not isinstance(frame, dict):
                continue
            res.frames.append(frame)
            t = frame.get("type")
            if t == "boot-ack":
                if not acked and program is not None:
                    acked = True
                    self.send({"type": "run", "program": program})
            elif t == "log":
                res.log_frames.append(frame)
                ledger.log(frame)
            elif t == "call":
                res.calls.append(frame)
                if handler is not None:
                    reply = handler(frame)
                    if reply is not None:
                        self.send(reply)
            elif t == "output":
                res.outputs.append(frame)
            elif t == "done":
                res.done = frame
                res.done_raw = line
                break
        res.logs = ledger.entries
        if not keep:
            self.finish(res)
        return res

    def finish(self, res, wait=10):
        try:
            self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        rc = self.proc.returncode
        res.returncode = rc
        res.signal = -rc if rc < 0 else None
        res.stdout = self.proc.stdout.read()
        res.stderr = self.proc.stderr.read()
        self.close()

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.outq.put(None)
        self.sock.close()
        self.wsock.close()
        self.proc.stdout.close()
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def ns(global_, *names, error_class=None, signatures=None):
    d = {"global": global_, "names": list(names)}
    if error_class is not None:
        d["errorClass"] = {"name": error_class[0], "memberNameProperty": error_class[1]}
    if signatures is not None:
        d["signatures"] = list(signatures)
    return d


def reply_ok(frame, value):
    return {"type": "reply", "id": frame["id"], "ok": True, "value": value}


def reply_err(frame, message):
    return {"type": "reply", "id": frame["id"], "ok": False, "message": message}


def echo(frame):
    return reply_ok(frame, frame["args"])


def run(program, handler=None, namespaces=(), timeout=20, child=None, **boot):
    """Run one program end to end; returns the Result."""
    c = child or Child()
    c.boot(namespaces=namespaces, **boot)
    return c.serve(handler, timeout=timeout, program=program)


@pytest.fixture
def child():
    c = Child()
    yield c
    if c.proc.returncode is None:
        c.close()
