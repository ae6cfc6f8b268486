"""coderun-rpc sandboxed fork: how a fork server's child becomes a tier-sandbox run (docs/containment-start-modes.md §4.1).

Loaded by forkserver.py when the server is started with --sandbox. A spawn request's argv is then
the sandbox init's command, `<daemon> coderun-sandbox-forkinit <settings>... -- <python> <script>`,
and its descriptors are the run's four, the relay pipe (fd 4), the run's cgroup files (5...) and
the daemon's binary (last: the command's path is /proc/self/fd/<it>).
The server makes each run's first process with clone() instead of os.fork(); contain() is called
in that child (I) once it leads its own session with every signal blocked and those descriptors
in place, and returns only in the program's process:

    server  clone(user, PID, mount, IPC, UTS, network) -> I: one system call, the user namespace
            made first and owning the others, so an unprivileged server may; I is PID 1 at once
    I       its one-id maps (the server's uid and gid as root), a socket pair to its child,
            fork -> P, then execs the daemon's init (child/sandbox, forkserver_linux.go) with the
            socket on fd 3: it prepares the namespaces, moves P into the run's cgroups, sets P's
            rlimits, builds P's Landlock ruleset, sends P the ruleset and the seccomp filter, then
            watches and relays as the init of every sandboxed run does; the server reaps it
    P       unblocks its signals, leads a process group of its own when it is a session's
            interpreter (`session=1` among the settings), closes the init's descriptors, waits
            for the init's word, then
            sets no_new_privs and applies the ruleset and the filter it was given (three system
            calls: the rules and the filter are the daemon's Go code, not repeated here), and
            returns to run bootstrap.py

Standard library only; nothing here runs program code.
"""

import ctypes
import os
import sys
import _signal
import _socket

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACES = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET

# clone's number on each architecture the sandbox supports (golang.org/x/sys unix.SYS_CLONE for
# amd64, arm64, riscv64, loong64, ppc64le). Its arguments after the flags are in a different
# order on some of them; all are 0 here, so the order does not matter.
SYS_CLONE = {"x86_64": 56, "aarch64": 220, "riscv64": 220, "loongarch64": 220, "ppc64le": 120}[os.uname().machine]

PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
SYS_LANDLOCK_RESTRICT_SELF = 446  # one number on every architecture that has it

INIT_FAILED = 125  # as the init's own: the run could not be started
EXEC_FAILED = 126  # as the exec stage's: the program could not be confined

# I's one-id maps, with the server's ids read here, in the server: in I, unmapped until it writes
# them, getuid() and getgid() return the overflow ids.
_ID_MAPS = (("/proc/self/setgroups", b"deny"), ("/proc/self/uid_map", b"0 %d 1" % os.getuid()),
            ("/proc/self/gid_map", b"0 %d 1" % os.getgid()))

# The interpreter's own fork protocol, around a clone it does not make itself (os.fork's: the
# import lock and the at-fork hooks before; the thread state, the GIL and the locks re-made in
# the child). A PyDLL call keeps the GIL across it, as the child must return holding it (a CDLL
# call releases it, and the child would resume without the lock its copy of the state says it
# holds).
_api = ctypes.PyDLL(None, use_errno=True)
_syscall = _api.syscall
_syscall.restype = ctypes.c_long
_syscall.argtypes = (ctypes.c_long,) * 6
_before_fork, _after_fork_parent, _after_fork_child = \
    _api.PyOS_BeforeFork, _api.PyOS_AfterFork_Parent, _api.PyOS_AfterFork_Child
for _f in (_before_fork, _after_fork_parent, _after_fork_child):
    _f.restype, _f.argtypes = None, ()
del _f

# What I blocks before anything else (forkserver.py's child path). The daemon signals the run's
# group, which I leads: as PID 1 of its namespace, I already never sees a signal from outside it
# whose action is the default (SIGKILL and SIGSTOP aside), but it would see one it has a handler
# for (the interpreter's SIGINT), until its execve resets the handlers. Blocked instead of reset
# one by one: one system call. Still pending at the init's execve, such a signal finds the
# default action there and is dropped once the init's runtime unblocks it, or meets the action
# the init sets for it.
BLOCKED = _signal.valid_signals()


def clone():
    """The server's fork for a run: I, in six new namespaces, PID 1 of its PID namespace.

    Returns 0 in I and I's pid in the server; raises OSError (the server's E reply) when the kernel
    refuses, e.g. ENOSPC when the user's namespaces are exhausted, EPERM where user namespaces are
    not allowed. No CLONE_VM and no stack: fork's semantics, the child goes on on its copy. The
    server has one thread, so nothing else can hold a lock the child would inherit held, and the
    little Python that runs in the child before PyOS_AfterFork_Child (the call's return, one
    comparison) cannot meet another thread's state. glibc's cached thread id (the thread's own,
    set by its fork) is the server's in I, so I does as little as it can before its execve
    (contain), and nothing that reads it (recursive or robust locks).
    """
    _before_fork()
    pid = _syscall(SYS_CLONE, NAMESPACES | _signal.SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        _after_fork_child()
        return 0
    err = ctypes.get_errno()
    _after_fork_parent()
    if pid < 0:
        raise OSError(err, "clone of a sandboxed run: %s" % os.strerror(err))
    return pid


class _SockFprog(ctypes.Structure):
    """struct sock_fprog, made once in the server: a class made in each child costs ~50 us."""
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _fail(code, what):
    try:
        os.write(2, b"coderun sandbox: " + what.encode("utf-8", "replace") + b"\n")
    finally:
        os._exit(code)


def _map_ids():
    for path, text in _ID_MAPS:
        try:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, text)
            finally:
                os.close(fd)
        except OSError as e:
            raise OSError(e.errno, "writing %s: %s" % (path, e.strerror))


def contain(libc, argv, env, nfds):
    """In I, fds 0..nfds-1 in place: returns the program's argv in P; I execs the init or exits."""
    try:
        sep = argv.index(b"--")
        prog = argv[sep + 1:]
        if len(prog) < 2:
            raise ValueError("no program")
        _map_ids()
        mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        # A normal fork: glibc's cached thread id is stale in I, made by a raw clone, and fork
        # sets the child's own, so only I's few steps up to its execve run with the stale one.
        pid = os.fork()
    except (OSError, ValueError) as e:
        _fail(INIT_FAILED, "fork server: %s" % e)
    if pid == 0:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, ())  # I's blocked signals are I's only
        mine.close()
        if b"session=1" in argv[1:sep]:
            # A session's interpreter leads its own process group (as the exec stage's setpgid
            # does for a spawned one): its group kill spares the init, which outlives it while
            # forks of it live, and the daemon takes it as the family's first member only then.
            os.setpgid(0, 0)
        _confine(libc, theirs, nfds)
        return prog[1:]
    try:
        theirs.close()
        os.dup2(mine.fileno(), 3)  # the init's line to P; P holds the run's own fd 3
        mine.close()
        cmd = argv[1:sep] + [b"prog=%d" % pid] + argv[sep:]
        # One P for the init's Go runtime: it mostly waits, and fewer Ps start fewer threads
        # (~0.2 ms less CPU per start here). The program's environment is set apart, in P.
        os.execve(argv[0], cmd, dict([e.partition(b"=")[::2] for e in env] + [(b"GOMAXPROCS", b"1")]))
    except OSError as e:
        _fail(INIT_FAILED, "fork server: starting the init: %s" % e)


def _confine(libc, sock, nfds):
    """P: wait for the init's word, then confine this process with what it sent."""
    os.closerange(4, nfds)  # the relay and the cgroup files are the init's
    data, fds = b"", []
    try:
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "little"):
            chunk, anc, _, _ = sock.recvmsg(1 << 16, _socket.CMSG_SPACE(4))
            if not chunk:
                os._exit(EXEC_FAILED)  # the init failed, and said why on stderr
            data += chunk
            for level, kind, payload in anc:
                if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                    fds.append(int.from_bytes(payload[:4], sys.byteorder))
        sock.close()
        if len(fds) != 1:
            raise OSError(0, "no Landlock ruleset from the init")
        flt = ctypes.create_string_buffer(data[4:], len(data) - 4)
        fprog = _SockFprog(len(flt) // 8, ctypes.addressof(flt))
        steps = (
            ("no_new_privs", lambda: libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)),
            ("landlock_restrict_self", lambda: libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, fds[0], 0)),
            ("seccomp filter", lambda: libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0)),
        )
        for name, step in steps:
            if step() != 0:
                raise OSError(ctypes.get_errno(), name)
        os.close(fds[0])
    except OSError as e:
        _fail(EXEC_FAILED, "%s" % e)
