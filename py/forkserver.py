"""coderun-rpc fork server: forks one fresh child per run from a pristine interpreter (docs/containment-start-modes.md §4).

Started as `<python> -u -I <serverdir>/forkserver.py` next to bootstrap.py and protocol.py, with
fd 3 a SOCK_SEQPACKET control socket to the daemon (package child, ForkServer). It imports what
the bootstrap needs before its boot frame, executes protocol.py's hot section, compiles
bootstrap.py, and then only serves requests: it never executes program code and never reads a
boot frame, so every child starts from the same untouched state.

Control messages, one per packet:

    daemon -> server   b"S" seq NUL dir NUL argv... NUL NUL env...   SCM_RIGHTS [fd0, fd1, fd2, fd3]
                       b"A <seq> <pid>"                        adopt a session's fork
    server -> daemon   b"P <seq> <pid> <start-time>"           the child runs / is adopted
                       b"E <seq> <errno> <message>"            no child
                       b"X <pid> <wait-status> <utime-us> <stime-us> <maxrss-kb>"   reaped
                       b"W <module> <why>"                     an optional preload failed to import
                       b"F <module> <why>"                     a required one did: the server exits
                       b"R <vmsize-kb> <vmrss-kb>"             set up: the server serves

Started with `--preload name,?name,...` (CODERUN_PRELOAD), it imports each module after its own
imports and before it freezes its objects, one W or F per module that fails (a module that leaves
a second thread running fails: a fork copies only the calling thread). The daemon sets the BLAS
and OpenMP thread counts to one in the server's environment. Its R comes last, before it reads a
request. A child reseeds numpy's global generator (`random` reseeds itself at every fork).

A child, before anything else: becomes a session leader, sets its parent-death signal to SIGKILL
(the chain: daemon dies -> server killed by its own -> child killed), moves the four descriptors
to 0-3 and closes every other one, restores signal dispositions and the mask, enters `dir` with
`env` as its whole environment, takes `argv` as sys.argv, and runs bootstrap.py as `__main__`
from there: it reads its boot frame and applies its limits exactly as a spawned child does. The
server learns that the child is set up when the child's end of a sync pipe closes, so a `P`
reply always names a process that already leads its own group.

The server is a child subreaper (PR_SET_CHILD_SUBREAPER): an orphan of any of its children
becomes its child, is reaped, and gets an X report. A session child's fork (the grandchild of
a double fork, docs/child-protocol-sessions.md §6.3) is such an orphan; the daemon claims it with A,
and the server answers P only for a process that is its child, leads its own session, and is
not already one it spawned or adopted (a program cannot pass off another process as the fork).

Started with --sandbox (tier sandbox, docs/containment-start-modes.md §4.1), it loads sandboxfork.py from its
directory, a request carries the run's relay pipe and cgroup files after the four descriptors
(placed from fd 4 on), and its argv is the sandbox init's command. The child is then made in the
run's new namespaces (sandboxfork.clone, PID 1 there), blocks every signal instead of restoring
the mask, and enters the sandbox (sandboxfork.contain): it forks the program's process, which
runs bootstrap.py, and becomes the run's init.
"""


def _report(message):
    """One unsolicited control message to the daemon (before the server serves: fd 3 is idle)."""
    import _socket
    ctl = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, 3)
    try:
        ctl.send(message[:480])
    finally:
        ctl.detach()


def _one_line(text):
    return " ".join(text.split()).encode("utf-8", "replace")


def preload_one(name, optional):
    """Imports module name for CODERUN_PRELOAD: W (optional) or F (required, then exit 1) when it
    fails. A module that leaves a thread running fails too: the server forks, and a child would
    inherit that thread's locks and memory without the thread."""
    import importlib
    import os
    import sys
    try:
        importlib.import_module(name)
    except BaseException as e:  # a module may raise anything, SystemExit included
        why = _one_line("%s: %s" % (type(e).__name__, e))
        _report(b"%s %s %s" % (b"W" if optional else b"F", name.encode(), why))
        if not optional:
            sys.exit(1)
        return
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        _report(b"F %s left %d threads running after its import; the fork server must have one" % (
            name.encode(), threads))
        sys.exit(1)


def fill_pools():
    """Fills the free blocks of the allocator's partly used pools with objects kept for good.

    A child allocates its first objects into those blocks, which lie scattered over the pages
    the server filled: each first write copies a page (a copy-on-write fault), so a child that
    allocates a few hundred small objects would copy a few hundred pages, and more the larger
    the server (a preload). Filled, they leave a child's objects to fresh pools, packed in few
    pages. The counts per size class are the allocator's own (sys._debugmallocstats, one
    table row per class: index, block size, pools, blocks in use, free blocks); an interpreter
    without pymalloc prints no such table, and nothing is filled. Returns what it keeps.
    """
    import os
    import sys
    out = os.memfd_create("coderun-mallocstats")
    saved = os.dup(2)
    try:
        os.dup2(out, 2)
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    os.lseek(out, 0, os.SEEK_SET)
    with open(out, "rb") as f:
        table = f.read()
    kept = []
    for row in table.partition(b"avail blocks")[2].split(b"\n")[2:]:
        fields = row.split()
        if len(fields) != 5 or not all(x.isdigit() for x in fields):
            break
        size, free = int(fields[1]), int(fields[4])
        # object() is 16 bytes, a float 24 (the 32-byte class), bytes of length n 33 + n.
        make = object if size == 16 else (float if size == 32 else (lambda n=size - 33: bytes(n)))
        kept += [make() for _ in range(free)]
    return kept


def _serve():
    import builtins
    import os
    import sys
    import _signal
    import _socket
    import select
    import ctypes

    here = os.path.dirname(os.path.abspath(sys.modules["__main__"].__file__))

    # What a spawned child imports before its boot frame, done once here.
    import _thread  # noqa: F401
    import time  # noqa: F401
    import resource  # noqa: F401
    # asyncio too: a spawned child imports it only for a program that could observe an event
    # loop (~60-90 ms of its CPU); here it is imported once, and a program that awaits
    # asyncio.gather starts at once. Nothing of it runs until a child's program uses it.
    import asyncio  # noqa: F401
    with open(here + "/protocol.py", "rb") as f:
        hot = f.read().partition(b"\n# ==== cold section")[0]
    proto = type(sys)("coderun_protocol")
    exec(compile(hot, here + "/protocol.py", "exec", dont_inherit=True), proto.__dict__)
    with open(here + "/bootstrap.py", "rb") as f:
        bootstrap = compile(f.read(), here + "/bootstrap.py", "exec", dont_inherit=True)

    def rehearse():
        # A forked child shares the server's pages until it writes them, and touching an object
        # writes its reference count: the first run would take each copy-on-write fault on its
        # critical path. Compiling, executing and encoding a dummy program takes most of them
        # while the child waits for its boot frame. Nothing of it stays reachable.
        codec = proto.make_codec()
        code, _ = proto.compile_program("x = [1]\nreturn x")
        scratch = {"__builtins__": builtins}
        exec(code, scratch)
        try:
            scratch[proto.WRAPPER_FUNCTION]().send(None)
        except StopIteration:
            pass
        codec.encode([1, "a", {"k": 1.5}], 1024)
        codec.decode('{"type": "run", "program": "x"}')

    # The server rehearses too, before freezing: the code the child runs is then quickened and
    # specialised, type version tags and the method cache are filled, so a child's rehearsal
    # writes (and copies) half as many pages: ~270 -> ~145 faults, ~2.1 -> ~1.1 ms of CPU per
    # refill here. Ten rounds pass CPython's warm-up; more change nothing.
    for _ in range(10):
        rehearse()

    # The operator's preload (CODERUN_PRELOAD, after --preload): imported once here, so a run's
    # `import pandas` finds it in sys.modules. Each name is reported before the server serves.
    preload = sys.argv[sys.argv.index("--preload") + 1].split(",") if "--preload" in sys.argv[1:] else []
    # A preloaded matplotlib reads its backend now: the bootstrap's, which a child's plt.show()
    # then imports through the child's own hook (bootstrap.py, install_matplotlib).
    os.environ["MPLBACKEND"] = "module://" + proto.MPL_BACKEND
    for token in preload:
        preload_one(token.lstrip("?"), token.startswith("?"))
    nprandom = sys.modules.get("numpy.random")

    # Every object so far is the server's, never garbage: frozen, a child's collections skip
    # them instead of touching (and so copying) every page the server filled.
    import gc
    gc.collect()
    filled = fill_pools()  # noqa: F841 (kept: the blocks stay taken in every child)
    gc.freeze()

    # Tier sandbox (started with --sandbox): each child contains itself (sandboxfork.py).
    sandbox = None
    if "--sandbox" in sys.argv[1:]:
        sandbox = type(sys)("coderun_sandboxfork")
        with open(here + "/sandboxfork.py", "rb") as f:
            exec(compile(f.read(), here + "/sandboxfork.py", "exec", dont_inherit=True), sandbox.__dict__)

    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    # Heap pages malloc keeps after the imports go back to the kernel: a child inherits the
    # server's page tables, and its exit tears them down (~26 us per MB here); ~1.6 MB less.
    trim = getattr(libc, "malloc_trim", None)  # glibc only
    if trim is not None:
        trim(0)
    PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
    if prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    server_pid = os.getpid()
    known = set()   # the children spawned or adopted and not yet reaped
    ctl = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, 3)
    fds_space = _socket.CMSG_SPACE(16 * 4)  # the run's four, a sandbox's relay and cgroup files
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    _signal.set_wakeup_fd(wake_w)
    _signal.signal(_signal.SIGCHLD, lambda signum, frame: None)
    poller = select.poll()
    poller.register(3, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    status = open("/proc/self/status", "rb").read()
    sizes = [status.partition(key)[2].split(None, 1)[0] for key in (b"VmSize:", b"VmRSS:")]
    ctl.send(b"R %s %s" % tuple(sizes))  # ready: the daemon may fork (address space, RSS in kB)

    def stat_fields(pid):
        """/proc/<pid>/stat (pid may be "self") from field 3 (state) on: [1] ppid, [3] session,
        [19] start time."""
        with open("/proc/%s/stat" % pid, "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:].split()

    def start_time(pid):
        return int(stat_fields(pid)[19])

    # A child's parent, and its signal mask until it runs bootstrap.py. A sandboxed child is PID 1
    # of its own namespaces: its getppid() is 0, the server being outside them, but /proc is still
    # the host's there; it blocks every signal until its init takes over (sandboxfork.BLOCKED).
    parent, mask = os.getppid, ()
    if sandbox is not None:
        parent, mask = (lambda: int(stat_fields("self")[1])), sandbox.BLOCKED

    def run_child(dir_, argv, env, fds):
        ctl.detach()  # fd 3 becomes the run's socket: this object must never close it
        os.setsid()
        if prctl(PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0) != 0 or parent() != server_pid:
            os._exit(127)
        _signal.set_wakeup_fd(-1)
        for sig in (_signal.SIGCHLD, _signal.SIGXCPU):
            _signal.signal(sig, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(len(fds), os.sysconf("SC_OPEN_MAX"))  # also the sync pipe: the server goes on
        if sandbox is not None:
            # Returns in the program's own process only, confined, with the program's argv.
            argv = sandbox.contain(libc, argv, env, len(fds))
        os.chdir(dir_)
        os.environb.clear()
        for entry in env:
            key, _, value = entry.partition(b"=")
            os.environb[key] = value
        sys.argv = [os.fsdecode(a) for a in argv]
        sys.orig_argv = sys.orig_argv[:-1] + sys.argv
        main = type(sys)("__main__")
        main.__file__ = sys.argv[0]
        main.__builtins__ = builtins
        sys.modules["__main__"] = main
        sys.modules["_coderun_forked_protocol"] = proto
        if nprandom is not None:
            nprandom.seed()  # numpy's global generator is the server's copy: a seed of the run's own
        rehearse()
        exec(bootstrap, main.__dict__)

    def child_main(dir_, argv, env, fds):
        # Mirrors the interpreter's own end of a script: an uncaught exception is printed and
        # exits 1, SystemExit exits with its code; stdio is flushed before the exit.
        code = 0
        try:
            run_child(dir_, argv, env, fds)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            code = 1
            try:
                sys.excepthook(*sys.exc_info())
            except BaseException:
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code)

    # A forked child's P reply waits for its end of the sync pipe to close (the child is set up),
    # without blocking the loop: children of earlier runs keep being reaped and reported
    # meanwhile. by_sync maps a sync pipe to its (seq, pid, start time); setting_up maps the
    # pid to its sync pipe, so that a child that dies while setting up gets its P before its X.
    by_sync, setting_up = {}, {}

    # A spawn request carries a run's environment, its egress token included, and every later
    # child is a copy of this process's memory. So a request is received into this one buffer
    # and never copied here: the server checks its layout by offsets, the child parses its own
    # copy, and the server zeroes the buffer once the child is forked (serve_request). Freed
    # objects would keep their bytes for a later child to read.
    request = bytearray(1 << 16)
    blank = memoryview(bytes(len(request)))

    def spawn_fields(n):
        """The offsets of request[1:n]'s NUL-separated fields, without copying any."""
        bounds, start = [], 1
        while True:
            end = request.find(b"\0", start, n)
            if end < 0:
                return bounds + [(start, n)]
            bounds.append((start, end))
            start = end + 1

    def spawn(seq, n, fds):
        """Fork for request seq (request[:n]); returns an E reply, or None once forked."""
        fields = spawn_fields(n)
        empty = [k for k in range(2, len(fields)) if fields[k][0] == fields[k][1]]
        if len(fds) != (4 if sandbox is None else max(len(fds), 5)) or not empty \
                or fields[1][0] == fields[1][1] or empty[0] == 2:
            return b"E %s 22 malformed spawn request" % seq
        sync_r, sync_w = os.pipe()
        try:
            pid = os.fork() if sandbox is None else sandbox.clone()
        except OSError as e:
            os.close(sync_r)
            os.close(sync_w)
            return b"E %s %d %s" % (seq, e.errno or 0, str(e).encode("utf-8", "replace"))
        if pid == 0:
            parts = bytes(request[1:n]).split(b"\0")  # the child's own copy of its request
            sep = empty[0]
            child_main(parts[1], parts[2:sep], parts[sep + 1:], fds)
        os.close(sync_w)
        known.add(pid)
        by_sync[sync_r] = (seq, pid, start_time(pid))  # not reaped before this loop turn ends
        setting_up[pid] = sync_r
        poller.register(sync_r, select.POLLIN)
        return None

    def set_up(sync_r):
        """The child of sync_r is set up (or dead): its P reply."""
        poller.unregister(sync_r)
        os.close(sync_r)
        seq, pid, start = by_sync.pop(sync_r)
        del setting_up[pid]
        ctl.send(b"P %s %d %d" % (seq, pid, start))

    def reap():
        while True:
            try:
                pid, status, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            known.discard(pid)
            if pid in setting_up:
                set_up(setting_up[pid])
            ctl.send(b"X %d %d %d %d %d" % (pid, status, round(ru.ru_utime * 1e6),
                                            round(ru.ru_stime * 1e6), ru.ru_maxrss))

    def adopt(parts):
        """A <seq> <pid>: claim an orphan that is a session's fork, or say why not."""
        if len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit():
            return b"E 0 22 malformed adopt request"
        seq, pid = parts[0], int(parts[1])
        try:
            fields = stat_fields(pid)
        except (OSError, ValueError, IndexError):
            return b"E %s 3 no process %d" % (seq, pid)
        if pid in known or int(fields[1]) != server_pid or int(fields[3]) != pid \
                or fields[0] == b"Z":
            return b"E %s 1 process %d is not an unclaimed fork" % (seq, pid)
        known.add(pid)
        return b"P %s %d %d" % (seq, pid, int(fields[19]))

    def serve_request():
        n, anc, _, _ = ctl.recvmsg_into([request], fds_space)
        if not n:
            os._exit(0)  # the daemon closed the socket: every child dies with this process
        fds = []
        for level, kind, payload in anc:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                m = len(payload) - len(payload) % 4
                fds += [int.from_bytes(payload[i:i + 4], sys.byteorder) for i in range(0, m, 4)]
        op = request[0]
        if op == ord("A"):
            reply = adopt(bytes(request[2:n]).split(b" "))
        else:
            end = request.find(b"\0", 1, n)
            seq = bytes(request[1:end if end >= 0 else n])
            seq = seq if seq.isdigit() else b"0"
            reply = spawn(seq, n, fds) if op == ord("S") else b"E %s 22 unknown request" % seq
        request[:n] = blank[:n]
        for fd in fds:
            os.close(fd)
        if reply is not None:
            ctl.send(reply)

    while True:
        for fd, _ in poller.poll():
            if fd == wake_r:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                reap()
            elif fd == 3:
                serve_request()
            elif fd in by_sync:
                set_up(fd)


_serve()
