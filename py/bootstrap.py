"""coderun-rpc child: runs one program, speaking the fd-3 protocol (docs/child-protocol-child.md §3).

Started as `<python> -u -I <rundir>/bootstrap.py`, fd 3 a blocking AF_UNIX stream socket:

    daemon                                   child (this file)
      |                                        | reset + unblock SIGXCPU; imports
      | -- boot {limits, namespaces} -------->  |
      |                                        | RLIMIT_CORE/CPU/AS, 12x recheck
      | <------------- done{error} (failure) -- |   ... and stop, no boot-ack
      |                                        | ledger, proxies, error classes
      | <----------------------- boot-ack ---- |
      | -- run {program} -------------------->  | stdout/stderr -> ledger streams
      | <--- call / log ---  --- reply --->    | program runs (reply pump on the loop)
      | <--------------------------- done ---- | recheck CPU, flush, validate, encode

Standard library only. Everything runs inside `_coderun_child()`: the helpers are closures
over builtins captured before the program starts, so a program that rebinds or deletes globals
of `__main__` (this module) or attributes of the classes defined here cannot change dispatch,
reply decoding, the CPU recheck, the verdict or the `done` frame (docs/child-protocol-child.md §3.7).

Start-up cost is a feature: only `protocol.py`'s hot section is compiled at boot (its
diagnostics on the exception path only), and asyncio is imported only for a program that
could observe an event loop (see protocol.compile_program); other programs, including ones
awaiting bindings, are driven without it. A warm child waits for `boot` having imported
nothing more than a cold one would: every import is charged to the run's CPU budget.
"""


def _coderun_child():
    import builtins as B
    import os
    import sys
    import _signal
    import _thread
    from time import sleep

    # Captured before the program runs: nested functions read these cells, never a later
    # rebinding of __main__ globals (docs/child-protocol-child.md §3.7).
    (len, type, bytes, bytearray, memoryview, min, dict, BaseException, RuntimeError,
     ValueError, MemoryError, isinstance, int, range, str) = (
        B.len, B.type, B.bytes, B.bytearray, B.memoryview, B.min, B.dict, B.BaseException,
        B.RuntimeError, B.ValueError, B.MemoryError, B.isinstance, B.int, B.range, B.str)
    compile_, exec_, open_ = B.compile, B.exec, B.open
    make_session_fork, make_bypass_note = _make_session_fork, _make_bypass_note
    os_read, os_write, os_kill, os_getpid, os_exit = os.read, os.write, os.kill, os.getpid, \
        os._exit
    os_writev = os.writev
    sig_signal, sig_mask = _signal.signal, _signal.pthread_sigmask
    SIGXCPU, SIG_DFL, SIG_UNBLOCK = _signal.SIGXCPU, _signal.SIG_DFL, _signal.SIG_UNBLOCK
    sys_modules = sys.modules
    real_stdout, real_stderr = sys.__stdout__, sys.__stderr__

    # 1. SIGXCPU back to its default disposition, unblocked (docs/child-protocol-child.md §3.1 step 1).
    sig_signal(SIGXCPU, SIG_DFL)
    sig_mask(SIG_UNBLOCK, {SIGXCPU})

    here = os.path.dirname(os.path.abspath(sys_modules["__main__"].__file__))
    ppath = here + "/protocol.py"
    cold_marker = b"\n# ==== cold section"
    # A fork server (py/forkserver.py) hands over protocol.py's hot section already executed
    # in its pristine interpreter; a spawned child compiles it here. Only the hot part is
    # compiled at boot; the cold part (diagnostics, frame TypedDicts) on first use: see
    # protocol.py's COLD_SECTION.
    proto = sys_modules.pop("_coderun_forked_protocol", None)
    if proto is None:
        proto = type(sys)("coderun_protocol")
        with open_(ppath, "rb") as f:
            hot = f.read().partition(cold_marker)[0]
        exec_(compile_(hot, ppath, "exec", dont_inherit=True), proto.__dict__)
    proto.__file__ = ppath
    P = proto

    cold_loaded = []

    def load_cold():
        """protocol.py's namespace with its cold section executed (once, on first use)."""
        if not cold_loaded:
            with open_(ppath, "rb") as f:
                hot, sep, cold = f.read().partition(cold_marker)
            # Blank lines in place of the hot section keep the cold section's line numbers.
            cold = b"\n" * (hot.count(b"\n") + 1) + sep[1:] + cold
            exec_(compile_(cold, ppath, "exec", dont_inherit=True), proto.__dict__)
            cold_loaded.append(proto.__dict__)
        return cold_loaded[0]

    def load_diagnostics():
        return load_cold()["make_diagnostics"]()

    refusal_where = _make_refusal_where(load_cold)

    codec = P.make_codec()
    encode, decode, string, cap_message = codec.encode, codec.decode, codec.string, \
        codec.cap_message
    OK, OVER_BUDGET = P.OK, P.OVER_BUDGET
    FD = P.PROTOCOL_FD
    READ_SIZE = P.CHILD_READ_SIZE
    FALLBACK = P.FALLBACK_DONE_FRAME.encode() + b"\n"
    RENDER_FAILED = P.RENDER_FAILED
    KIND_EXCEPTION, KIND_OUTPUT_LIMIT, KIND_INVALID_OUTPUT = \
        P.KIND_EXCEPTION, P.KIND_OUTPUT_LIMIT, P.KIND_INVALID_OUTPUT
    WRAPPER = P.WRAPPER_FUNCTION

    # ---- fd 3 ------------------------------------------------------------------------
    chan_lock = _thread.RLock()

    def write_all(data):
        n = os_write(FD, data)
        if n < len(data):           # rare: a big frame on a full socket
            view = memoryview(data)[n:]
            while view:
                view = view[os_write(FD, view):]

    JOIN_MAX = 1 << 16
    IOV_BATCH = 512                 # below IOV_MAX (1024): writev's limit on parts per call
    join = b"".join

    def writev_all(parts):
        """Write every part, in order, gathered by writev(2): the kernel takes them from
        where they lie, so a megabyte payload is never joined with its frame's head."""
        views = [memoryview(p).cast("B") for p in parts]
        while views:
            n = os_writev(FD, views[:IOV_BATCH])
            while views and n >= len(views[0]):
                n -= len(views[0])
                del views[0]
            if n:
                views[0] = views[0][n:]

    def send(*parts):
        """Write one frame (parts joined, then a newline) under the channel lock.

        A frame up to 64 KiB goes out in ONE write (one syscall, one wake-up of the daemon's
        reader); a bigger one in one writev(2) of its parts as they are (more calls only
        when the socket takes part of it), never copied whole (RLIMIT_AS).
        """
        size = 0
        for p in parts:
            size += len(p)
        with chan_lock:
            if size <= JOIN_MAX:
                write_all(join(parts + (b"\n",)))
                return
            writev_all(parts + (b"\n",))

    def fallback_done():
        try:
            with chan_lock:
                write_all(FALLBACK)
        except BaseException:
            pass

    rbuf = bytearray()

    def read_frame_blocking(read=None):
        """Read one line from fd 3 (64 KiB reads into the shared residual); None at EOF.
        read, when given, replaces os.read (a session's idle loop receives descriptors)."""
        start = 0
        while True:
            pos = rbuf.find(b"\n", start)
            if pos >= 0:
                line = bytes(rbuf[:pos])
                del rbuf[:pos + 1]
                return line
            start = len(rbuf)
            data = os_read(FD, READ_SIZE) if read is None else read()
            if not data:
                return None
            rbuf.extend(data)

    asyncio_mods = []

    def load_asyncio():
        if not asyncio_mods:
            import asyncio
            import _asyncio
            asyncio_mods.append(asyncio)
            asyncio_mods.append(_asyncio.get_running_loop)
        return asyncio_mods[0]

    # `resource` (step 3) is loaded before the boot wait: a warm child then applies its
    # limits without an import on the run's critical path (a cold one imports it anyway).
    # A failure here is reported by step 3's own import.
    try:
        import resource
    except BaseException:
        pass

    # What needs nothing from the boot frame is built before waiting for it: a warm child
    # does it while in the pool, off the run's critical path. Nothing of it can run the
    # program's code or write to fd 3 before the boot frame has been read.
    program_globals = {"__name__": "__main__", "__builtins__": B}
    install, attach_pump, unpump, drive, retire = _make_bindings(
        send, codec, P, rbuf, load_asyncio, asyncio_mods, load_cold)
    (out_stream, out_st), (err_stream, err_st), s_flush, set_budget, seal = _make_log_streams(
        send, codec, P, sys_modules["io"].TextIOBase)
    compile_program = P.compile_program
    display, set_output_budget, install_matplotlib = _make_display(
        send, codec, P, lambda: (s_flush(out_st), s_flush(err_st)), err_stream.write)

    # 2. boot
    line = read_frame_blocking()
    if line is None:
        raise RuntimeError("bootstrap: fd 3 closed before the boot frame")
    boot = decode(line.decode("utf-8"))
    if type(boot) is not dict or boot.get("type") != P.FRAME_BOOT:
        raise RuntimeError("bootstrap: the first frame is not a boot frame")
    max_log = boot["maxLogBytes"]
    max_value = boot["maxValueBytes"]

    def done_error(kind, message, exc_type=None, line_no=None, path=None, hint=None):
        parts = [b'{"type":"done","error":{"kind":', string(kind), b',"message":',
                 string(message)]
        if exc_type is not None:
            parts += [b',"exceptionType":', string(exc_type)]
        if line_no is not None:
            parts += [b',"line":', b"%d" % line_no]
        if path is not None:
            parts += [b',"path":', string(path)]
        if hint is not None:
            parts += [b',"hint":', string(hint)]
        parts.append(b"}}")
        send(*parts)

    def check_room(max_log, max_value):
        """The output budgets must fit the address space left (docs/child-protocol-child.md §3.3)."""
        if soft_as is None:
            return
        room = soft_as - P.INTERPRETER_BASELINE
        for name, budget in (("maxLogBytes", max_log), ("maxValueBytes", max_value)):
            if budget * P.OUTPUT_BUDGET_MULTIPLE >= room:
                raise ValueError(
                    "%s is too large for the inherited RLIMIT_AS of %d bytes (%d bytes "
                    "times the 12x worst-case Unicode expansion must fit within the %d "
                    "bytes left after the %d-byte interpreter baseline)"
                    % (name, soft_as, budget, room, P.INTERPRETER_BASELINE))

    def limits_failed(e):
        try:
            msg = "%s: %s" % (type(e).__name__, e)
        except BaseException:
            msg = RENDER_FAILED
        done_error(KIND_EXCEPTION, cap_message(
            "bootstrap: applying resource limits failed\n" + msg, max_value))

    # 3. limits (docs/child-protocol-child.md §3.3; a session's, §6.1)
    session = boot.get("session") is True
    cpu_soft = soft_as = None
    try:
        import resource
        getrusage, getrlimit, setrlimit = resource.getrusage, resource.getrlimit, \
            resource.setrlimit
        RUSAGE_SELF, RUSAGE_CHILDREN = resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN
        RLIMIT_CPU, INF = resource.RLIMIT_CPU, resource.RLIM_INFINITY
        from time import clock_gettime
        PROF_CLOCK = -8     # MAKE_PROCESS_CPUCLOCK(0, CPUCLOCK_PROF): this process's PROF clock

        def clamp(which, soft, hard, cpu):
            isoft, ihard = getrlimit(which)
            if isoft != INF:
                soft = min(soft, isoft)
            if ihard != INF:
                hard = min(hard, ihard)
            soft = min(soft, hard)
            if cpu and soft == hard and hard >= 2:
                soft = hard - 1
            setrlimit(which, (soft, hard))
            return soft

        setrlimit(resource.RLIMIT_CORE, (0, 0))
        cpu = boot["cpuSeconds"]
        cpu_soft = clamp(RLIMIT_CPU, cpu, cpu + 1, True)
        if sys.platform != "darwin":
            space = boot["addressSpaceBytes"]
            soft_as = clamp(resource.RLIMIT_AS, space, space, False)
        fsize = boot.get("fileSizeBytes")
        if fsize:  # the disk budget, for a file the daemon's measure cannot see
            clamp(resource.RLIMIT_FSIZE, fsize, fsize, False)
        check_room(max_log, max_value)
    except BaseException as e:
        limits_failed(e)
        return

    def cpu_spent():
        a = getrusage(RUSAGE_SELF)
        b = getrusage(RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

    def cpu_charged():
        """cpu_spent with this process's own CPU read on the clock the kernel holds
        RLIMIT_CPU against: its utime+stime charged a tick at a time, which runs ahead of
        getrusage's figure on a busy machine (by 10-20% measured under load, growing with
        the process's age), where getrusage scales to the scheduler's exact runtime."""
        try:
            own = clock_gettime(PROF_CLOCK)
        except BaseException:   # a platform without CPU clock ids (EINVAL)
            return cpu_spent()
        b = getrusage(RUSAGE_CHILDREN)
        return own + b.ru_utime + b.ru_stime

    def cpu_recheck():
        """Success path only: die by SIGXCPU when the budget is spent (docs/child-protocol-child.md §3.3)."""
        if cpu_spent() >= cpu_soft:
            sig_signal(SIGXCPU, SIG_DFL)
            sig_mask(SIG_UNBLOCK, {SIGXCPU})
            os_kill(os_getpid(), SIGXCPU)
            while True:
                sleep(0.05)

    # 4. the run's installed packages (docs/packages.md): before site-packages, so the set's
    # versions win over the interpreter's own; the ledger, the proxies
    extra = boot.get("sysPath")
    if extra:
        at = next((i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))),
                  len(sys.path))
        sys.path[at:at] = [p for p in extra if type(p) is str]
    env = boot.get("env")   # the run's secret placeholders (docs/containment.md §6)
    if type(env) is dict:
        for key, value in env.items():
            if type(key) is str and type(value) is str:
                os.environ[key] = value
    set_budget(max_log)
    set_output_budget(boot["maxOutputBytes"])
    install(boot["namespaces"], program_globals)
    program_globals["display"] = B.display = display
    install_matplotlib(os.environ)
    bypass_note = make_bypass_note() if boot.get("egressNote") or boot.get("session") else None
    if boot.get("egressNote"):
        bypass_note(boot["egressNote"])
    send(b'{"type":"boot-ack"}')

    # ---- settlement --------------------------------------------------------------------
    # away[0]: this process is a copy the program made with os.fork() (a session registers
    # the hook, §6.2): it must never speak on fd 3, nor settle the run a second time.
    away = [False]

    def wind_up():
        """Flush the streams, stop the reply pump, and close the run (nothing after done)."""
        for st in (out_st, err_st):
            try:
                s_flush(st)
            except BaseException:
                pass
        for s in (real_stdout, real_stderr):
            try:
                s.flush()
            except BaseException:
                pass
        unpump()
        seal()
        retire()
        if away[0]:
            os_exit(0)

    def release_frames(e):
        # A program that ran out of address space usually still holds the memory in its
        # frames' locals (top-level names are locals of the wrapper), leaving too little to
        # compile the diagnostics; they need only code objects and line numbers.
        try:
            tb = e.__traceback__
            while tb is not None:
                try:
                    tb.tb_frame.clear()
                except BaseException:   # a frame still executing (this file's)
                    pass
                tb = tb.tb_next
        except BaseException:
            pass

    def settle_exception(e):
        if isinstance(e, MemoryError):
            release_frames(e)
        try:
            message, exc_type, line_no = load_diagnostics()(e, max_value)
        except BaseException:
            message, exc_type, line_no = RENDER_FAILED, None, None
        wind_up()
        done_error(KIND_EXCEPTION, cap_message(message, max_value), exc_type, line_no)

    def settle_success(value):
        cpu_recheck()
        for st in (out_st, err_st):
            try:
                s_flush(st)
            except BaseException:
                pass
        st, payload = encode(value, max_value)
        wind_up()
        if st == OK:
            send(b'{"type": "done", "value": ', payload, b"}")
        elif st == OVER_BUDGET:
            done_error(KIND_OUTPUT_LIMIT, "completion value exceeded %d bytes" % max_value)
        else:
            path, hint = refusal_where(payload)
            done_error(KIND_INVALID_OUTPUT, cap_message(
                "program completion must be lossless JSON (%s)" % payload, max_value),
                path=path, hint=hint)

    async def runner(fn):
        return await fn()

    def run_program(program, bound_names=None):
        """Steps 6-8: run program in program_globals and send its done; returns the event
        loop the run created, or None."""
        sys.stdout = out_stream
        sys.stderr = err_stream
        loop = None
        try:
            try:
                code, with_loop = compile_program(program, bound_names)
                exec_(code, program_globals)
                main = program_globals[WRAPPER]
                if with_loop:
                    asyncio = load_asyncio()
                    loop = asyncio.new_event_loop()
                    asyncio.set_event_loop(loop)
                    attach_pump(loop)
                    value = loop.run_until_complete(runner(main))
                else:
                    value = drive(runner(main))
            except BaseException as e:
                settle_exception(e)
            else:
                try:
                    settle_success(value)
                except BaseException as e:
                    settle_exception(e)
        except BaseException:
            if not away[0]:
                fallback_done()
        return loop

    # ---- session mode (docs/child-protocol-sessions.md §6) ---------------------------------------
    def move_cpu_soft(seconds):
        """Soft RLIMIT_CPU = CPU used so far (reaped children included), rounded up, plus
        this run's budget, below the session's hard limit (§6.2)."""
        nonlocal cpu_soft
        now, hard = getrlimit(RLIMIT_CPU)
        soft = -int(-cpu_charged() // 1) + seconds
        if hard != INF:
            soft = min(soft, hard - 1)
        if soft != now:     # read just now: whatever the last program did to it
            setrlimit(RLIMIT_CPU, (soft, hard))
        cpu_soft = soft
        sig_signal(SIGXCPU, SIG_DFL)
        sig_mask(SIG_UNBLOCK, {SIGXCPU})

    def session_run(msg, bound_names):
        """One run in the session: its budgets, its bindings, the persistent globals."""
        nonlocal max_log, max_value
        program = msg.get("program")
        if type(program) is not str:
            return
        try:
            ml, mv = msg.get("maxLogBytes", max_log), msg.get("maxValueBytes", max_value)
            check_room(ml, mv)
            move_cpu_soft(msg.get("cpuSeconds", boot["cpuSeconds"]))
        except BaseException as e:
            limits_failed(e)
            return
        max_log, max_value = ml, mv
        set_budget(ml)
        set_output_budget(msg.get("maxOutputBytes", boot["maxOutputBytes"]))
        install(msg.get("namespaces") or [], program_globals)
        program_globals["display"] = B.display = display
        if msg.get("egressNote"):
            bypass_note(msg["egressNote"])
        loop = run_program(program, bound_names)
        if loop is not None:
            try:
                loop.close()
                asyncio_mods[0].set_event_loop(None)
            except BaseException:
                pass

    def went_away():
        # os.register_at_fork(after_in_child=...): a copy the program forks keeps quiet.
        nonlocal chan_lock
        chan_lock = _thread.RLock()
        away[0] = True
        seal(True)
        retire(True)

    def serve_session():
        """The idle loop: run and fork frames until fd 3 ends (§6.1)."""
        import _socket
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, FD)
        space = _socket.CMSG_SPACE(4 * 4)  # a fork's three, and in tier sandbox its ruleset
        SOL_SOCKET, SCM_RIGHTS = _socket.SOL_SOCKET, _socket.SCM_RIGHTS
        byteorder = sys.byteorder
        fdq = []            # descriptor sets received, oldest first (one per fork frame)

        def receive():
            data, anc, _, _ = sock.recvmsg(READ_SIZE, space)
            for level, kind, payload in anc:
                if level == SOL_SOCKET and kind == SCM_RIGHTS:
                    n = len(payload) - len(payload) % 4
                    fdq.append([int.from_bytes(payload[i:i + 4], byteorder)
                                for i in range(0, n, 4)])
            return data

        bound_names = load_cold()["top_level_names"]
        os.register_at_fork(after_in_child=went_away)
        forker, set_proxy = make_session_fork(send, string, fdq, rbuf, away)
        while True:
            line = read_frame_blocking(receive)
            if line is None:
                return
            try:
                msg = decode(line.decode("utf-8"))
            except BaseException:
                continue
            if type(msg) is not dict:
                continue
            kind = msg.get("type")
            if kind == P.FRAME_RUN:
                session_run(msg, bound_names)
            elif kind == P.FRAME_FORK:
                forker(msg, fdq.pop(0) if fdq else [])
            elif kind == P.FRAME_PROXY:
                set_proxy(msg.get("url"))

    if session:
        serve_session()
        os_exit(0)

    # 5. run
    line = read_frame_blocking()
    if line is None:
        return
    run_program(decode(line.decode("utf-8"))["program"])
    os_exit(0)


def _make_session_fork(send, string, fdq, rbuf, away):
    """The `fork` frame of an idle session child (docs/child-protocol-sessions.md §6.3): returns
    (fork(msg, fds), set_proxy(url)), the second for the `proxy` frame.

    fds are the descriptors that came with the frame: [stdout-w, stderr-w, fd3] of the fork,
    and in tier sandbox a fourth, the Landlock ruleset F stacks on its domain before anything
    else (docs/containment-start-modes.md §4.2: F then writes only under its own home).
    The fork F must be a child of the source's reaper (the fork server, or the sandbox's
    init), never of the source. When the source has a single thread, F is made at the cost
    of one fork: clone(CLONE_PARENT) wrapped as os.fork wraps fork(2) (PyOS_BeforeFork and
    the after-fork calls, at-fork hooks included), so F is born the reaper's child.
    Otherwise (another thread might hold a libc lock across a raw clone; an architecture
    without the mapping; a clone refused), the source double-forks and F is reparented to
    the subreaper when the middle process exits: a second fork and that process's teardown
    more. Either way the source returns to its idle loop, having sent nothing on its own
    fd 3. F takes the three descriptors as 1, 2 and 3 (every other one closed), leads a new
    session, enters the copied directory, sets its parent-death signal once its parent is
    the reaper, announces itself with `forked` on the new channel, and returns into the
    idle loop, now serving that channel. Any failure is reported as `fork-failed` on the
    new channel.

    With egress, the fork frame carries no credentials: F and the source each get a `proxy`
    frame with new ones on their own channel once F is made, so the credentials both held are
    dead and neither process's memory ever holds the other's (docs/containment.md §6).
    """
    import builtins as B
    import os
    import sys
    import _signal
    from time import monotonic, sleep
    len, type, str, range, zip, BaseException, OSError, ValueError = \
        B.len, B.type, B.str, B.range, B.zip, B.BaseException, B.OSError, B.ValueError
    # Captured while no program has run: a program that patches os cannot steer a fork.
    (fork_, setsid, dup2, closerange, chdir, getppid, getpid, write, close, waitpid,
     exit_, listdir) = (os.fork, os.setsid, os.dup2, os.closerange, os.chdir, os.getppid,
                        os.getpid, os.write, os.close, os.waitpid, os._exit, os.listdir)
    open_max = os.sysconf("SC_OPEN_MAX")
    environ, modules = os.environ, sys.modules
    SIGKILL, SIGCHLD = _signal.SIGKILL, _signal.SIGCHLD
    SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
    CLONE_PARENT = 0x8000
    LANDLOCK_RESTRICT_SELF = 446                # one number on every architecture that has it
    helpers = []

    def load_helpers():
        # Imported in the source, before forking: F then has them without importing.
        if not helpers:
            import ctypes
            import fcntl
            libc = ctypes.CDLL(None, use_errno=True)
            helpers.extend((libc.prctl, fcntl.fcntl, fcntl.F_DUPFD_CLOEXEC, sibling_maker(ctypes),
                            libc.syscall))
        return helpers

    def sibling_maker(ctypes):
        """os.fork with clone(CLONE_PARENT) for fork(2), or None where not available."""
        if SYS_CLONE is None:
            return None
        raw = ctypes.PyDLL(None).syscall         # a PyDLL keeps the GIL across the call
        raw.restype, raw.argtypes = ctypes.c_long, (ctypes.c_long,) * 6
        api = ctypes.pythonapi
        before, in_child, in_parent = \
            api.PyOS_BeforeFork, api.PyOS_AfterFork_Child, api.PyOS_AfterFork_Parent
        for f in (before, in_child, in_parent):
            f.restype, f.argtypes = None, ()

        def sibling():
            try:
                if len(listdir("/proc/self/task")) != 1:
                    return None
            except OSError:
                return None
            before()
            pid = raw(SYS_CLONE, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0)
            if pid == 0:
                in_child()
                return 0
            in_parent()
            return pid if pid > 0 else None
        return sibling

    def close_all(fds):
        for fd in fds:
            try:
                close(fd)
            except OSError:
                pass

    def fork_failed(fd, e):
        try:
            text = "%s: %s" % (type(e).__name__, e)
        except BaseException:
            text = "fork failed"
        try:
            write(fd, b'{"type":"fork-failed","message":' + string(text) + b"}\n")
        except BaseException:
            pass

    def become_fork(fds, dir_, middle):
        """In F: take the new descriptors, then set up as the class says (or raise)."""
        prctl, fcntl, dupfd, _, syscall = helpers
        high = [fcntl(fd, dupfd, 10) for fd in fds]   # above 0-3, whatever fds are
        for target, fd in zip((1, 2, 3), high):
            dup2(fd, target)
        fds[2] = 3                              # where a failure is reported from now on
        if len(high) == 4 and syscall(LANDLOCK_RESTRICT_SELF, high[3], 0) != 0:
            raise OSError("landlock_restrict_self of the fork's ruleset failed")
        closerange(4, open_max)
        setsid()
        chdir(dir_)
        move_tmpdir(dir_)
        deadline = monotonic() + 5
        while middle is not None and getppid() == middle:   # the middle process is exiting
            if monotonic() > deadline:
                raise OSError("the fork was not reparented within 5 s")
            sleep(0.0001)
        reaper = getppid()
        if prctl(1, SIGKILL, 0, 0, 0) != 0 or getppid() != reaper:  # PR_SET_PDEATHSIG
            exit_(1)
        del rbuf[:]
        del fdq[:]
        away[0] = False
        send(b'{"type":"forked","pid":%d}' % getpid())

    def set_proxy(url):
        # The `proxy` frame: the proxy variables the daemon set (none without egress) now carry
        # url; urllib's installed opener, which read the old ones, is dropped.
        if type(url) is not str:
            return
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            if name in environ:
                environ[name] = url
        request = modules.get("urllib.request")
        if request is not None:
            request._opener = None

    def move_tmpdir(dir_):
        # The run directory is also TMPDIR (docs/child-protocol-daemon.md §4.3): the fork's is
        # its own directory, and tempfile's cached choice is dropped.
        if environ.get("TMPDIR") is not None:
            environ["TMPDIR"] = dir_
        tempfile = modules.get("tempfile")
        if tempfile is not None:
            tempfile.tempdir = None

    def in_fork(fds, dir_, middle):
        try:
            become_fork(fds, dir_, middle)
        except BaseException as e:
            fork_failed(fds[2], e)
            exit_(1)

    def in_middle(fds, dir_):
        """In the middle process: fork F and exit at once, so F is orphaned."""
        middle = getpid()
        try:
            if fork_() != 0:
                exit_(0)
        except BaseException as e:
            fork_failed(fds[2], e)
            exit_(1)
        in_fork(fds, dir_, middle)

    def fork(msg, fds):
        if len(fds) not in (3, 4):
            close_all(fds)
            return
        dir_ = msg.get("dir")
        try:
            if type(dir_) is not str or not dir_.startswith("/"):
                raise ValueError("the fork frame's dir is not an absolute path")
            sibling = load_helpers()[3]
            pid = sibling() if sibling is not None else None
            middle = pid is None
            if middle:
                pid = fork_()
        except BaseException as e:
            fork_failed(fds[2], e)
            close_all(fds)
            return
        if pid == 0:
            if middle:
                in_middle(fds, dir_)
            else:
                in_fork(fds, dir_, None)
            return                              # F: back to the idle loop, on the new fd 3
        close_all(fds)
        if middle:
            try:
                waitpid(pid, 0)
            except OSError:
                pass
    return fork, set_proxy


def _make_log_streams(send, codec, P, TextIOBase):
    """The shared log ledger and the two line-coalescing streams over it (docs/child-protocol-child.md §3.4).

    Returns ((stdout, state), (stderr, state), flush(state), set_budget(max_log), seal()).
    Built before the boot frame (a warm child does it while it waits); set_budget opens the
    ledger for a run once its maxLogBytes is known, before anything is written (a session
    opens it again for each run); seal closes it after a session run's `done`, so that a
    thread the program left behind writes nothing while the child is idle. Settlement
    flushes through the returned closure, never through the stream class (whose
    attributes the program may rebind).
    """
    import builtins as B
    len, type, str, max, TypeError = B.len, B.type, B.str, B.max, B.TypeError
    join = b"".join
    import _thread
    string, quoted, type_name = codec.string, codec.quoted, codec.type_name
    COALESCE = P.FRAGMENT_COALESCING
    ledger_lock = _thread.RLock()
    ledger = [0, False, False]               # remaining, truncated, open entry accumulating
    marker = [None]

    states = []                              # both streams' pending state

    def set_budget(max_log):
        ledger[0] = max_log - 1
        ledger[1] = ledger[2] = False
        marker[0] = P.log_truncation_marker(max_log)
        for st in states:
            st[0] = []
            st[1] = 0

    def seal(after_fork=False):
        # after_fork: in a fork's only thread; another thread of the parent may have held
        # the lock when it forked, so the fork gets a new one.
        nonlocal ledger_lock
        if after_fork:
            ledger_lock = _thread.RLock()
        with ledger_lock:
            ledger[1] = True
    LOG_HEAD, CLOSED, OPEN = b'{"type":"log","text":', b"}", b',"open":true}'
    # Frames of the write() call in progress: one write() that completes several lines
    # sends them in one fd-3 write per 64 KiB instead of one per line. They are sent before
    # write() returns (and before any other frame of this ledger), so order is kept and
    # nothing waits on a later event. batch holds their parts, newline-separated.
    batch = []
    batch_state = [0, 0]                     # batching on, bytes held
    BATCH_MAX = 1 << 16

    def drain():
        if batch:
            data = join(batch)
            del batch[:]
            batch_state[1] = 0
            send(data)

    def truncate():
        if not ledger[1]:
            ledger[1] = True
            drain()
            send(LOG_HEAD, string(marker[0]), b',"truncated":true}')

    def push(text, is_open):
        """Bill one entry or fragment and send its frame; the caller holds ledger_lock."""
        if ledger[1]:
            return
        remaining, accumulating = ledger[0], ledger[2]
        n = len(text)
        if (n if accumulating else n + 3) > remaining:
            truncate()
            return
        body = quoted(text, remaining + 2 if accumulating else remaining - 1, False)
        if body is None:
            truncate()
            return
        cost = len(body)
        ledger[0] = remaining - (cost - 2 if accumulating else cost + 1)
        ledger[2] = is_open
        tail = OPEN if is_open else CLOSED
        size = len(LOG_HEAD) + cost + len(tail)
        if not batch_state[0] or size >= BATCH_MAX:
            drain()
            send(LOG_HEAD, body, tail)
            return
        if batch:
            batch.append(b"\n")
        batch.extend((LOG_HEAD, body, tail))
        batch_state[1] += size
        if batch_state[1] >= BATCH_MAX:
            drain()

    def s_flush(st):
        with ledger_lock:
            pend = st[0]
            if pend:
                text = "".join(pend)
                st[0] = []
                st[1] = 0
                push(text, True)

    def make_stream(name):
        st = [[], 0]                         # pending fragments, their total length
        states.append(st)

        class LogStream(TextIOBase):
            """Line-coalescing text stream billed to the run's log ledger (docs/child-protocol-child.md §3.4)."""

            def write(self, text):
                if type(text) is not str:
                    raise TypeError("write() argument must be str, not %s" % type_name(text))
                n = len(text)
                if not n:
                    return 0
                with ledger_lock:
                    if ledger[1]:
                        st[0] = []
                        st[1] = 0
                        return n
                    pend = st[0]
                    plen = st[1]
                    lim = ledger[0] + 4
                    nl = text.find("\n", 0, max(0, lim - plen) + 1)
                    if nl < 0:
                        if plen + n > ledger[0]:
                            head = "".join(pend) + text[:lim + 1 - plen]
                            st[0] = []
                            st[1] = 0
                            push(head, False)
                        else:
                            pend.append(text)
                            st[1] = plen + n
                            if len(pend) >= COALESCE:
                                st[0] = ["".join(pend)]
                        return n
                    first = "".join(pend) + text[:nl] if pend else text[:nl]
                    st[0] = pend = []
                    st[1] = 0
                    start = nl + 1
                    if start >= n:           # one line completed (print): no batching
                        push(first, False)
                        return n
                    batch_state[0] = 1
                    try:
                        push(first, False)
                        while start < n and not ledger[1]:
                            remaining = ledger[0]
                            if remaining == 0:
                                push(text[start:start + 1], False)
                                break
                            lim = remaining + 4
                            nl = text.find("\n", start, start + lim + 1)
                            if nl < 0:
                                if n - start > remaining:
                                    push(text[start:start + lim + 1], False)
                                else:
                                    pend.append(text[start:])
                                    st[1] = n - start
                                break
                            push(text[start:nl], False)
                            start = nl + 1
                    finally:
                        batch_state[0] = 0
                        drain()
                    return n

            def flush(self):
                s_flush(st)

            def isatty(self):
                return False

            def writable(self):
                return True

            encoding = "utf-8"
            errors = "strict"
            line_buffering = False

            @property
            def name(self):
                return name

            def __repr__(self):
                return "<coderun log stream %s>" % name

        return LogStream(), st

    return make_stream("<stdout>"), make_stream("<stderr>"), s_flush, set_budget, seal


def _make_bypass_note():
    """install(note): word the OSError of a blocked direct connection with note (tier sandbox).

    The daemon's boot frame (a session's: each run frame) carries `egressNote` in tier sandbox
    only: the run's egress policy and the way out (docs/containment.md §6). A failed
    `socket.socket.connect` of an AF_INET or AF_INET6 socket with an errno a blocked connection
    fails with, and a `socket.getaddrinfo` that finds no address (names resolve only at the
    proxy), raise the same class and errno with the note as their text. The kernel refuses the
    connection (the network namespace, Landlock); this only words the error, and a program that
    undoes it changes nothing else. `socket` is patched once: now when imported already (a
    forked child), else as it is first imported (nothing more is imported at boot); a later
    install (a session's next run) only changes the note.
    """
    import builtins as B
    import sys
    from errno import EPERM, EACCES, ENETUNREACH, EHOSTUNREACH, ECONNREFUSED
    blocked = (EPERM, EACCES, ENETUNREACH, EHOSTUNREACH, ECONNREFUSED)
    type_, str_, getattr_, OSError_ = B.type, B.str, B.getattr, B.OSError
    sys_modules, meta_path = sys.modules, sys.meta_path
    current = [None]                                  # the note; None until the first install

    def patch(socket):
        cls, inet = socket.socket, (socket.AF_INET, socket.AF_INET6)
        connect, getaddrinfo, gaierror = cls.connect, socket.getaddrinfo, socket.gaierror
        no_address = [getattr_(socket, n, None) for n in ("EAI_NONAME", "EAI_AGAIN", "EAI_FAIL",
                                                           "EAI_NODATA")]

        def connect_(self, address):
            try:
                return connect(self, address)
            except OSError_ as e:
                if self.family not in inet or e.errno not in blocked:
                    raise
                raise type_(e)(e.errno, current[0]) from None

        def getaddrinfo_(*args, **kwargs):
            try:
                return getaddrinfo(*args, **kwargs)
            except gaierror as e:
                if e.errno not in no_address:
                    raise
                raise gaierror(e.errno, current[0]) from None

        connect_.__name__, connect_.__qualname__ = "connect", "socket.connect"
        getaddrinfo_.__name__ = getaddrinfo_.__qualname__ = "getaddrinfo"
        cls.connect, socket.getaddrinfo = connect_, getaddrinfo_

    def install(note):
        if type_(note) is not str_ or not note:
            return
        first = current[0] is None
        current[0] = note
        if not first:
            return
        socket = sys_modules.get("socket")
        if socket is not None:
            patch(socket)
            return
        finder = type_(sys)("coderun_socket_hook")    # a finder, functions only
        path_finder = sys_modules["_frozen_importlib_external"].PathFinder

        def find_spec(name, path=None, target=None):
            if name != "socket" or finder not in meta_path:
                return None
            meta_path.remove(finder)                  # the first import only
            spec = path_finder.find_spec(name, path)
            if spec is None:
                return None
            real = spec.loader
            loader = type_(sys)("coderun_socket_loader")

            def exec_module(module):
                real.exec_module(module)
                patch(module)
            loader.exec_module, loader.create_module = exec_module, real.create_module
            loader.__getattr__ = lambda attr: getattr_(real, attr)   # get_source and the rest
            spec.loader = loader
            return spec

        finder.find_spec = find_spec
        meta_path.insert(0, finder)

    return install


def _make_refusal_where(load_cold):
    """refusal_where(refusal) -> (JSON path, hint) of a codec refusal (docs/child-protocol.md
    §2.7), or (None, None) when they cannot be told."""
    import builtins as B
    BaseException = B.BaseException

    def refusal_where(refusal):
        try:
            return refusal.path, load_cold()["refusal_hint"](refusal)
        except BaseException:
            return None, None
    return refusal_where


def _make_bindings(send, codec, P, rbuf, load_asyncio, asyncio_mods, load_cold):
    """Namespace proxies, error classes, call slots and the reply pump (docs/child-protocol-wire.md §2.9, docs/child-protocol-child.md §3.5).

    Built before the boot frame; returns (install(namespaces, program_globals),
    attach_pump(loop), unpump(), drive(coro), retire()). install puts the boot frame's
    proxies and error classes into the program's globals; a namespace with `signatures`
    gets typed functions for its typed names (_make_typed, built only then). retire ends a
    session run's generation of proxies: calling one afterwards raises RuntimeError, and
    the call state (ids from 0, slots, pending replies) starts afresh for the next install.
    """
    import builtins as B
    (len, type, str, bytes, bool, list, dict, zip, BaseException, Exception, RuntimeError,
     TypeError, AttributeError, KeyError, ValueError, OSError, StopIteration) = (
        B.len, B.type, B.str, B.bytes, B.bool, B.list, B.dict, B.zip, B.BaseException,
        B.Exception, B.RuntimeError, B.TypeError, B.AttributeError, B.KeyError, B.ValueError,
        B.OSError, B.StopIteration)
    make_typed_factory = _make_typed
    refusal_where = _make_refusal_where(load_cold)
    import os
    import _thread
    from _collections import deque
    encode, decode, string = codec.encode, codec.decode, codec.string
    OK = P.OK
    FD, READ_SIZE, RENDER_FAILED = P.PROTOCOL_FD, P.CHILD_READ_SIZE, P.RENDER_FAILED
    os_read = os.read
    get_ident = _thread.get_ident
    main_ident = get_ident()
    exc_init = BaseException.__init__
    host_errors = {name: B.__dict__[name] for name in P.HOST_ERROR_TYPES.split()}
    obj_setattr = object.__setattr__
    obj_getattribute = object.__getattribute__
    # Binding proxies (docs/child-protocol-child.md §3.5) ------------------------------------------------------------
    call_lock = _thread.allocate_lock()
    slot_lock = _thread.allocate_lock()
    slots = [P.CALL_SLOTS]
    waiters = deque()
    pending = {}
    next_id = [0]
    pump_loop = [None]
    token_of = B.object
    generation = [token_of()]               # the live proxies' token; retire() replaces it

    def grant(fut):
        if not fut.done():
            fut.set_result(None)

    def release_slot():
        with slot_lock:
            while waiters:
                w = waiters.popleft()
                w[2] = True
                try:
                    w[0].call_soon_threadsafe(grant, w[1])
                    return
                except BaseException:
                    w[2] = False
            slots[0] += 1

    async def acquire_slot(loop):
        with slot_lock:
            if slots[0] > 0 and not waiters:
                slots[0] -= 1
                return
            w = [loop, loop.create_future(), False]
            waiters.append(w)
        try:
            await w[1]
        except BaseException:
            with slot_lock:
                if not w[2]:
                    try:
                        waiters.remove(w)
                    except ValueError:
                        pass
            if w[2]:
                release_slot()
            raise

    def deliver(fut, ok, payload):
        if not fut.done():
            fut.set_result((ok, payload))

    OK_HEAD, OK_MID = b'{"type":"reply","id":', b',"ok":true,"value":'
    digits, int = B.frozenset(b"0123456789"), B.int

    def handle_line(line):
        if not line:
            return
        # The daemon writes a successful reply as exactly OK_HEAD id OK_MID value "}"
        # (session/frames.go replyOK): only the value is decoded, no frame dict built.
        # Any other line, a failed reply included, is decoded whole.
        j = line.find(b",", 21)
        if line.startswith(OK_HEAD) and j > 21 and line.startswith(OK_MID, j) \
                and digits.issuperset(line[21:j]) and (line[21] != 48 or j == 22) \
                and line[-1] == 125:
            value = decode(line[j + 19:-1].decode("utf-8"))
            entry = pending.pop(int(line[21:j]), None)
            if entry is None:
                return
            release_slot()
            dispatch(entry, True, value)
            return
        msg = decode(line.decode("utf-8"))
        if type(msg) is not dict or msg.get("type") != "reply":
            return
        entry = pending.pop(msg.get("id"), None)
        if entry is None:
            return
        release_slot()
        ok = msg.get("ok") is True
        payload = msg.get("value") if ok else msg.get("message")
        if not ok and msg.get("typeError") is True:
            ok = None                   # the daemon refused the arguments: settled raises TypeError
        elif not ok and type(msg.get("exceptionType")) is str:
            ok = msg["exceptionType"]   # the host named a built-in type: settled raises it
        dispatch(entry, ok, payload)

    def dispatch(entry, ok, payload):
        loop, fut = entry
        if loop is None:                # awaited by the driver (no asyncio loop)
            driver_results[fut] = (ok, payload)
        elif loop is pump_loop[0] and get_ident() == main_ident:
            deliver(fut, ok, payload)
        else:
            try:
                loop.call_soon_threadsafe(deliver, fut, ok, payload)
            except BaseException:
                pass        # that loop is closed: drop the reply, the slot is freed

    scan = [0]

    def pump():
        """Reader callback on the event loop: read fd 3, dispatch complete reply frames."""
        try:
            data = os_read(FD, READ_SIZE)
        except OSError:
            data = b""
        if not data:
            unpump()
            return
        consume(data)

    def consume(data):
        """Dispatch the complete lines of rbuf + data; the unterminated tail stays in rbuf."""
        if not rbuf and data.endswith(b"\n"):   # the usual read: whole replies, no copy
            chunk = data
        else:
            rbuf.extend(data)
            if rbuf.find(b"\n", scan[0]) < 0:
                scan[0] = len(rbuf)
                return
            last = rbuf.rfind(b"\n")
            chunk = rbuf[:last + 1]
            del rbuf[:last + 1]
            scan[0] = 0
        for ln in chunk.split(b"\n")[:-1]:
            try:
                handle_line(ln)
            except Exception:
                pass

    def attach_pump(loop):
        pump_loop[0] = loop
        loop.add_reader(FD, pump)
        if rbuf:
            loop.call_soon(pump_residual)

    def pump_residual():
        if b"\n" in rbuf:
            last = rbuf.rfind(b"\n")
            chunk = bytes(rbuf[:last + 1])
            del rbuf[:last + 1]
            for ln in chunk.split(b"\n")[:-1]:
                try:
                    handle_line(ln)
                except Exception:
                    pass

    def unpump():
        loop = pump_loop[0]
        if loop is not None:
            try:
                if not loop.is_closed():
                    loop.remove_reader(FD)
            except BaseException:
                pass

    def ensure_pump(loop):
        with slot_lock:
            cur = pump_loop[0]
            if cur is not None and not cur.is_closed():
                return
        attach_pump(loop)

    # The driver: a program that cannot observe an event loop (protocol.compile_program)
    # runs without asyncio, driven by drive(); its binding calls wait for their replies
    # themselves (wait_driven), reading fd 3 without suspending the program's coroutine.
    driving = [False]
    driver_results = {}

    def read_and_dispatch():
        try:
            data = os_read(FD, READ_SIZE)
        except OSError:
            data = b""
        if data:
            consume(data)
        return bool(data)

    def drive(coro):
        """Run a coroutine that awaits only bindings (or bare yields) to completion."""
        driving[0] = True
        error = None
        try:
            while True:
                try:
                    req = coro.send(None) if error is None else coro.throw(error)
                except StopIteration as stop:
                    return stop.value
                error = None
                if req is not None:         # a bare yield is the next "loop tick"
                    error = RuntimeError("the program awaited an object that needs an asyncio "
                                         "event loop (import asyncio in the program to get one)")
        finally:
            driving[0] = False

    def wait_driven(cid):
        """(ok, payload) of the driven call cid, reading fd 3 until its reply is in. A read
        that is exactly that reply's line in the daemon's fixed layout (handle_line) is
        settled here; anything else goes through consume."""
        head = b"%s%d%s" % (OK_HEAD, cid, OK_MID)
        while cid not in driver_results:
            try:
                data = os_read(FD, READ_SIZE)
            except OSError:
                data = b""
            if not data:
                raise RuntimeError("the protocol socket closed while a binding call was "
                                   "outstanding")
            if not rbuf and data.startswith(head) and data.find(b"\n") == len(data) - 1 \
                    and data[-2] == 125:
                try:
                    value = decode(data[len(head):-2].decode("utf-8"))
                    mine = pending.pop(cid, None) is not None
                except Exception:
                    mine = False                # consume drops the line, as it always did
                if mine:
                    release_slot()
                    return True, value
            consume(data)
        return driver_results.pop(cid)

    def call_frame(cid, head, payload):
        return b'{"type":"call","id":%d,"global":' % cid, head, payload, b"}"

    def send_claimed(cid, entry, head, payload):
        # Under call_lock: register the waiter, write the frame, advance the id —
        # so ids reach the wire in order; a failed write frees the slot again.
        pending[cid] = entry
        try:
            send(*call_frame(cid, head, payload))
        except BaseException:
            pending.pop(cid, None)
            release_slot()
            raise
        next_id[0] = cid + 1

    def settled(member, fail, ok, value):
        """The call's value, or its failure raised: ok is True, False, None (the daemon
        refused the arguments) or the built-in exception type the host named."""
        if ok is True:
            return value
        if type(value) is not str:
            value = P.UNRENDERABLE_REJECTION
        if ok is None:
            raise TypeError(value) from None
        raise fail(member, value, ok or None) from None

    def make_invoke(gname, member, fail, token):
        async def call_async(arg):
            try:
                st, payload = encode(arg)
            except Exception as e:
                try:
                    text = str(e)
                except BaseException:
                    text = RENDER_FAILED
                raise fail(member, "binding arguments must be lossless JSON: " + text) from None
            if st != OK:
                path, hint = refusal_where(payload)
                raise fail(member, "binding arguments must be lossless JSON (%s)%s%s" % (
                    payload, " at " + path if path else "", "; " + hint if hint else "")) \
                    from None
            if driving[0] and get_ident() == main_ident:
                # Driven (no event loop): claim a slot, send, and wait for the reply here;
                # inline, not a nested coroutine, as this is the sequential call's whole
                # path.
                while slots[0] <= 0:
                    if not read_and_dispatch():
                        raise RuntimeError("the protocol socket closed")
                with call_lock:
                    slots[0] -= 1
                    cid = next_id[0]
                    send_claimed(cid, (None, cid), head, payload)
                ok, value = wait_driven(cid)
                return settled(member, fail, ok, value)
            load_asyncio()
            loop = asyncio_mods[1]()
            ensure_pump(loop)
            await acquire_slot(loop)
            fut = loop.create_future()
            with call_lock:
                send_claimed(next_id[0], (loop, fut), head, payload)
            ok, value = await fut
            return settled(member, fail, ok, value)

        def invoke(arg):
            if generation[0] is not token:
                raise RuntimeError("%s.%s belongs to a finished run" % (gname, member))
            return call_async(arg)
        head = string(gname) + b',"name":' + string(member) + b',"args":'
        # The coroutine takes its names from call_async: a forgotten await is then
        # reported as "coroutine 'tools.search' was never awaited".
        call_async.__name__ = invoke.__name__ = member if member.isidentifier() else "binding"
        call_async.__qualname__ = invoke.__qualname__ = gname + "." + member
        return invoke

    def make_untyped(invoke):
        label = invoke.__qualname__

        def call(*args, **kwargs):
            if len(args) > 1:
                raise TypeError("%s() takes at most 1 positional argument (%d given)"
                                % (label, len(args)))
            if args and kwargs:
                raise TypeError("%s() takes either one positional argument or keyword "
                                "arguments, not both" % label)
            return invoke(args[0] if args else (kwargs if kwargs else None))
        call.__name__ = invoke.__name__
        call.__qualname__ = label
        return call

    def make_error_class(name, prop):
        def __init__(self, member, message):
            exc_init(self, message)
            obj_setattr(self, prop, member)
        return type(name, (Exception,), {"__init__": __init__, "__qualname__": name})

    typed = []

    def make_member(gname, name, fail, sig, token):
        invoke = make_invoke(gname, name, fail, token)
        if sig is None:
            return make_untyped(invoke)
        if not typed:
            typed.append(make_typed_factory(P, load_cold))
        return typed[0](invoke, sig)

    def ns_member(st, name):
        # The built member, or None; callers look members up first (the hot path). A
        # member is built on its first access (once: setdefault keeps the first one built
        # if two threads race), so declaring many functions and calling few costs little.
        members, declared, gname, fail, token = st
        if type(name) is not str or name not in declared:
            return None
        return members.setdefault(name, make_member(gname, name, fail, declared[name], token))

    def ns_missing(st, attr):
        return "tool %r is not declared in namespace %r" % (attr, st[2])

    class BindingNamespace:
        # One class serves every namespace of every run (a class statement per namespace
        # cost a session run more than the rest of its setup). An instance's state is its
        # one slot, read through the slot's descriptor, never through __getattribute__.
        __slots__ = ("_ns",)

        def __getattribute__(self, attr):
            st = ns_state(self)
            m = st[0].get(attr) if type(attr) is str else None
            if m is None:
                m = ns_member(st, attr)
            if m is not None:
                return m
            if attr != "_ns":
                try:
                    return obj_getattribute(self, attr)
                except AttributeError:
                    pass
            raise AttributeError(ns_missing(st, attr)) from None

        def __getitem__(self, key):
            st = ns_state(self)
            m = st[0].get(key) if type(key) is str else None
            if m is None:
                m = ns_member(st, key)
            if m is None:
                raise KeyError(ns_missing(st, key))
            return m

        def __setattr__(self, attr, value):
            raise AttributeError("binding namespace %r is read-only" % ns_state(self)[2])

        def __delattr__(self, attr):
            raise AttributeError("binding namespace %r is read-only" % ns_state(self)[2])

        def __dir__(self):
            return list(ns_state(self)[1])

        def __repr__(self):
            return "<binding namespace %r>" % ns_state(self)[2]

    ns_state, ns_init = BindingNamespace._ns.__get__, BindingNamespace._ns.__set__
    new_object = object.__new__

    def make_namespace(gname, names, fail, sigs):
        # A run with a typed function gets the typed factory now: help() must be its
        # Helper before the program can save a reference to it.
        if sigs and not typed and sigs.count(None) < len(sigs):
            typed.append(make_typed_factory(P, load_cold))
        ns = new_object(BindingNamespace)
        ns_init(ns, ({}, dict(zip(names, sigs or [None] * len(names))), gname, fail,
                     generation[0]))
        return ns

    def rejecter(cls, attributes):
        """fail(member, message, host_type=None): the exception a failed call raises. The
        namespace's error class always wins; without one, a built-in type the host named
        (one of HOST_ERROR_TYPES), else RuntimeError."""
        if cls is None:
            return lambda member, message, host_type=None: \
                host_errors.get(host_type, RuntimeError)(message)

        def fail(member, message, host_type=None):
            e = cls(member, message)
            for k, v in (attributes or {}).items():
                obj_setattr(e, k, v)
            return e
        return fail

    def install(namespaces, program_globals):
        classes = {}    # namespaces sharing a class (McpToolError) share one object
        for ns in namespaces:
            ec = ns.get("errorClass")
            cls = attributes = None
            if ec is not None:
                key = (ec["name"], ec["memberNameProperty"])
                cls = classes.get(key)
                if cls is None:
                    cls = classes[key] = make_error_class(*key)
                program_globals[ec["name"]] = cls
                attributes = ec.get("attributes")
            program_globals[ns["global"]] = make_namespace(ns["global"], ns["names"],
                                                           rejecter(cls, attributes), ns.get("signatures"))

    def retire(after_fork=False):
        # after_fork: as seal's; the fork gets new locks (its parent's may have been held).
        nonlocal call_lock, slot_lock
        generation[0] = token_of()
        if after_fork:
            call_lock, slot_lock = _thread.allocate_lock(), _thread.allocate_lock()
        with slot_lock:
            slots[0] = P.CALL_SLOTS
            waiters.clear()
        pending.clear()
        driver_results.clear()
        next_id[0] = 0
        pump_loop[0] = None

    return install, attach_pump, unpump, drive, retire


def _make_typed(P, load_cold):
    """Typed binding functions (docs/child-protocol-child.md §3.5): `make(invoke, sig)`.

    A typed function binds its arguments to the signature's parameters as CPython binds a
    def's (same TypeError wording, named `tools.search`) and calls invoke with the `args`
    object: the given parameters in stub order, then other keywords in call order when the
    signature says they pass (`kwargs`), else TypeError as for a def without **kwargs. It reads
    as its stub: `__doc__`, `__signature__` (built on first read, with `inspect`, by
    protocol.binding_signature), and `help()` prints the stub. Built on a run's first typed
    function, so an untyped run never pays for any of it; a function's binder is built on
    its first call, so declaring many functions costs a run little.
    """
    import builtins as B
    import sys
    from keyword import iskeyword
    len, type, TypeError, AttributeError = B.len, B.type, B.TypeError, B.AttributeError
    state = {}      # typed function -> [invoke, bind or None, sig, Signature or None]

    def positional(name):
        # The stubs' rule: an ASCII identifier, not a keyword, not the method's `self`;
        # any other name is passed as **{"name": value}.
        return name.isascii() and name.isidentifier() and not iskeyword(name) \
            and name != "self"

    def missing_positional(label, names):
        quoted = ["%r" % n for n in names]
        if len(quoted) == 1:
            listed = quoted[0]
        elif len(quoted) == 2:
            listed = quoted[0] + " and " + quoted[1]
        else:
            listed = ", ".join(quoted[:-1]) + ", and " + quoted[-1]
        return "%s() missing %d required positional argument%s: %s" % (
            label, len(names), "" if len(names) == 1 else "s", listed)

    def make_bind(label, params, kwargs_pass):
        names = {p["name"] for p in params}
        pos = {}
        for p in params:
            if positional(p["name"]):
                pos[p["name"]] = len(pos)
        npos = len(pos)
        order = [(p["name"], pos.get(p["name"], npos)) for p in params]
        req_pos = [p["name"] for p in params if p["required"] and p["name"] in pos]
        req_kw = [p["name"] for p in params if p["required"] and p["name"] not in pos]
        takes = "from %d to %d" % (len(req_pos), npos) if len(req_pos) < npos else "%d" % npos
        plural = "" if takes == "1" else "s"

        def bind(args, kwargs):
            # CPython's order of complaints: a keyword repeating a positional argument,
            # then too many positional arguments, then missing ones.
            n = len(args)
            if n and kwargs:
                for k in kwargs:
                    if pos.get(k, npos) < n:
                        raise TypeError("%s() got multiple values for argument '%s'"
                                        % (label, k))
            if n > npos:
                raise TypeError("%s() takes %s positional argument%s but %d %s given"
                                % (label, takes, plural, n, "was" if n == 1 else "were"))
            obj = {}
            for name, j in order:
                if j < n:
                    obj[name] = args[j]
                elif name in kwargs:
                    obj[name] = kwargs[name]
            if len(obj) < n + len(kwargs):
                for k in kwargs:
                    if k not in obj:
                        if not kwargs_pass and k not in names:
                            raise TypeError("%s() got an unexpected keyword argument '%s'"
                                            % (label, k))
                        obj[k] = kwargs[k]
            missing = [name for name in req_pos if name not in obj]
            if missing:
                raise TypeError(missing_positional(label, missing))
            for name in req_kw:
                if name not in obj:
                    raise TypeError("%s() missing required argument: %r" % (label, name))
            return obj
        return bind

    class TypedBinding:
        __slots__ = ()

        def __call__(self, /, *args, **kwargs):     # `self` may be a keyword argument
            st = state[self]
            bind = st[1]
            if bind is None:    # built on the first call: most declared functions get none
                bind = st[1] = make_bind(st[0].__qualname__, st[2]["params"],
                                         st[2].get("kwargs") is True)
            return st[0](bind(args, kwargs))

        @property
        def __doc__(self):
            return state[self][2]["doc"]

        def __getattr__(self, attr):
            st = state[self]
            if attr == "__signature__":
                if st[3] is None:
                    st[3] = load_cold()["binding_signature"](
                        st[2]["params"], positional, st[2]["stub"])
                return st[3]
            if attr == "__name__":
                return st[0].__name__
            if attr == "__qualname__":
                return st[0].__qualname__
            raise AttributeError("typed binding %s has no attribute %r"
                                 % (st[0].__qualname__, attr))

        def __repr__(self):
            return "<typed binding %s>" % state[self][0].__qualname__

    helper = getattr(B, "help", None)
    if helper is not None:
        class Helper(type(helper)):
            """help(): a typed binding's help is its stub; anything else goes to pydoc."""
            __slots__ = ()

            def __call__(self, /, *args, **kwargs):
                if len(args) == 1 and not kwargs and type(args[0]) is TypedBinding:
                    stub = state[args[0]][2]["stub"]
                    sys.stdout.write(stub if stub.endswith("\n") else stub + "\n")
                    return None
                return helper(*args, **kwargs)
        B.help = Helper()

    def make(invoke, sig):
        f = TypedBinding()
        state[f] = [invoke, None, sig, None]
        return f
    return make


# ---- display and rich outputs (docs/child-protocol-child.md §3.9) -------------------------------
def _make_display(send, codec, P, flush_logs, warn):
    """display() by the IPython display protocol, and the matplotlib backend behind plt.show().

    Returns (display, set_budget, install_matplotlib). set_budget(maxOutputBytes) starts a
    run's count of the outputs budget (a session calls it before each run); the daemon
    counts too and is the authority, this count only keeps an object that cannot fit from
    being encoded and sent at all. install_matplotlib() makes matplotlib, if the program
    ever imports it, use a non-interactive backend whose show() displays and closes every
    open figure: it only sets MPLBACKEND and adds a finder consulted for the backend
    module alone, so a program that never imports matplotlib pays nothing.
    """
    import builtins as B
    import sys
    (len, type, isinstance, str, bytes, bytearray, memoryview, dict, tuple, list, getattr, repr,
     callable, Exception, exec_, compile_) = (
        B.len, B.type, B.isinstance, B.str, B.bytes, B.bytearray, B.memoryview, B.dict, B.tuple,
        B.list, B.getattr, B.repr, B.callable, B.Exception, B.exec, B.compile)
    from binascii import b2a_base64
    string, encode, OK = codec.string, codec.encode, P.OK
    sys_modules = sys.modules
    head, truncated_frame = b'{"type":"output","data":{', b'{"type":"output","truncated":true}'
    COALESCE_MAX = 1 << 16                   # a piece this large is written as it is
    budget = [0, False, 0]                   # remaining bytes, truncated, outputs left
    overhead, entry_overhead = P.OUTPUT_OVERHEAD, P.OUTPUT_ENTRY_OVERHEAD
    max_entries = P.MAX_OUTPUT_ENTRIES
    methods = (("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
               ("image/svg+xml", "_repr_svg_"), ("text/html", "_repr_html_"),
               ("text/markdown", "_repr_markdown_"), ("application/json", "_repr_json_"),
               ("text/latex", "_repr_latex_"))

    def set_budget(max_output):
        budget[0] = max_output
        budget[1] = False
        budget[2] = P.MAX_OUTPUTS

    def is_text(mime):                       # protocol.IsTextMime
        return (mime.startswith("text/") or mime.endswith(("/json", "+json", "/xml", "+xml"))
                or mime == "application/javascript")

    def where(obj, method):
        try:
            return "%s.%s()" % (type(obj).__name__, method)
        except Exception:
            return method + "()"

    def skipped(obj, mime, why):
        warn("[coderun] display: the %s of a %s %s; skipped\n" % (mime, type(obj).__name__, why))

    def payload(mime, value, obj):
        """(JSON string as a tuple of pieces, cost) for one MIME entry, or None with a
        warning: a text costs its JSON string form without the quotes, a binary its bytes. Base64 is its own piece between the quotes: a megabyte image is
        encoded once and never copied again on its way to the wire."""
        if mime == "application/json":
            st, text = encode(value, budget[0])
            if st != OK:
                skipped(obj, mime, "is not lossless JSON within the outputs budget")
                return None
            quoted = string(text.decode("utf-8"))
            return (quoted,), len(quoted) - 2
        if is_text(mime):
            if not isinstance(value, str):
                skipped(obj, mime, "is %s, not str" % type(value).__name__)
                return None
            if len(value) > budget[0]:       # at least a byte a character: never encoded
                return (), len(value)
            quoted = string(value)           # billed as the daemon writes it, escapes included
            return (quoted,), len(quoted) - 2
        if not isinstance(value, (bytes, bytearray, memoryview)):
            skipped(obj, mime, "is %s, not bytes" % type(value).__name__)
            return None
        raw = memoryview(value).cast("B")
        if len(raw) > budget[0]:             # never encoded: it cannot fit
            return (), len(raw)
        return (b'"', b2a_base64(raw, newline=False), b'"'), len(raw)

    def call(obj, method, *args):
        """obj.method(*args) with IPython's conventions, or None (absent, None, raised)."""
        fn = getattr(obj, method, None)
        if fn is None or not callable(fn):
            return None
        try:
            value = fn(*args)
        except Exception as e:
            warn("[coderun] display: %s raised %s: %s\n" % (where(obj, method), type(e).__name__, e))
            return None
        if isinstance(value, tuple) and len(value) == 2:   # (data, metadata)
            value = value[0]
        return value

    def figure_png(obj):
        mf = sys_modules.get("matplotlib.figure")
        if mf is None or not isinstance(obj, mf.Figure):
            return None
        import io
        buf = io.BytesIO()
        try:
            obj.savefig(buf, format="png")
        except Exception as e:
            warn("[coderun] display: rendering the figure raised %s: %s\n" % (type(e).__name__, e))
            return None
        return buf.getvalue()

    def bundle(obj):
        """{mime: value} by the display protocol, text/plain always last."""
        data = {}
        mb = call(obj, "_repr_mimebundle_", None, None)
        if isinstance(mb, dict):
            for k, v in mb.items():
                if isinstance(k, str) and k:
                    data[k] = v
        png = figure_png(obj)
        if png is not None and "image/png" not in data:
            data["image/png"] = png
        for mime, method in methods:
            if mime not in data:
                v = call(obj, method)
                if v is not None:
                    data[mime] = v
        if "text/plain" not in data:
            try:
                data["text/plain"] = repr(obj)
            except Exception as e:
                data["text/plain"] = "<%s object (repr raised %s)>" % (
                    type(obj).__name__, type(e).__name__)
        return data

    def display(*objs):
        """Show each object as a rich output of the run (result.outputs, run/output)."""
        for obj in objs:
            show_one(obj)

    def show_one(obj):
        if budget[1]:
            return
        parts, size = [], overhead
        for mime, value in entries(obj):
            p = payload(mime, value, obj)
            if p is None:
                continue
            if parts:
                parts.append(b",")
            key = string(mime)
            parts += [key, b":", *p[0]]
            size += entry_overhead + len(key) - 2 + p[1]
        flush_logs()                          # what was printed before comes first
        if not parts:
            return
        if size > budget[0]:
            budget[1] = True
            send(truncated_frame)
            return
        budget[0] -= size
        send(*coalesce((head, *parts, b"}}")))
        budget[2] -= 1
        if budget[2] < 0:                     # the daemon refused this one past its count cap
            budget[1] = True

    def entries(obj):
        """The bundle's (mime, value) pairs, cut to the first max_entries - 1 and text/plain
        (always last) with a log line when there are more."""
        items = list(bundle(obj).items())
        if len(items) > max_entries:
            warn("[coderun] display: a %s has %d MIME types; the first %d and text/plain kept\n"
                 % (type(obj).__name__, len(items), max_entries - 1))
            items = items[:max_entries - 1] + items[-1:]
        return items

    def coalesce(parts):
        """parts with each run of small pieces joined: a frame with a large payload is
        three parts (what precedes it, the payload, what follows) for send's one writev,
        not one a piece."""
        out, run = [], []
        for p in parts:
            if len(p) < COALESCE_MAX:
                run.append(p)
                continue
            if run:
                out.append(b"".join(run))
                run = []
            out.append(p)
        if run:
            out.append(b"".join(run))
        return out

    backend = P.MPL_BACKEND
    backend_source = (
        "from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas\n"
        "from matplotlib.backend_bases import FigureManagerBase as FigureManager\n"
        "from matplotlib._pylab_helpers import Gcf as _Gcf\n"
        "def show(*args, **kwargs):\n"
        "    \"\"\"Display every open figure as image/png, then close it.\"\"\"\n"
        "    for manager in _Gcf.get_all_fig_managers():\n"
        "        _display(manager.canvas.figure)\n"
        "    _Gcf.destroy_all()\n")
    hook = type(sys)("coderun_matplotlib_hook")   # a finder and loader, functions only

    def install_matplotlib(environ):
        ModuleSpec = sys_modules["_frozen_importlib"].ModuleSpec

        def find_spec(name, path=None, target=None):
            if name == "matplotlib" and "MPLBACKEND" not in environ:
                environ["MPLBACKEND"] = "module://" + backend   # read as matplotlib loads
            elif name == backend:
                return ModuleSpec(name, hook)
            return None

        def exec_module(module):
            module.__dict__["_display"] = display
            exec_(compile_(backend_source, "<coderun matplotlib backend>", "exec"), module.__dict__)

        hook.find_spec, hook.exec_module = find_spec, exec_module
        hook.create_module = lambda spec: None
        sys.meta_path.insert(0, hook)

    return display, set_budget, install_matplotlib


_coderun_child()
