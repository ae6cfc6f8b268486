"""coderun-rpc sandboxed fork: how a fork server's child becomes a tier-sandbox run (docs/containment.md §4.1).

Loaded by forkserver.py when the server is started with --sandbox. A spawn request's argv is then
the sandbox init's command, `<daemon> coderun-sandbox-forkinit <settings>... -- <python> <script>`,
and its descriptors are the run's four, the relay pipe (fd 4), the run's cgroup files (5...) and
the daemon's binary (last: the command's path is /proc/self/fd/<it>).
contain() is called in the server's child (C) once it leads its own session with those
descriptors in place, and returns only in the program's process:

    C   unshare(user, PID, mount, IPC, UTS, network); one-id maps (its uid and gid as root)
        fork -> I, then holds nothing of the run, blocks every signal it can, waits for I and
        ends the way I did (the fork server reports that; the daemon reads the relay first)
    I   PID 1 of the new namespaces: a socket pair to its child, fork -> P, then execs the
        daemon's init (child/sandbox, forkinit_linux.go) with the socket on fd 3: it prepares the
        namespaces, moves P into the run's cgroups, sets P's rlimits, builds P's Landlock
        ruleset, sends P the ruleset and the seccomp filter, then watches and relays as the
        init of every sandboxed run does
    P   closes the init's descriptors, waits for the init's word, then sets no_new_privs and
        applies the ruleset and the filter it was given (three system calls: the rules and the
        filter are the daemon's Go code, not repeated here), and returns to run bootstrap.py

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

PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
SYS_LANDLOCK_RESTRICT_SELF = 446  # one number on every architecture that has it

INIT_FAILED = 125  # as the init's own: the run could not be started
EXEC_FAILED = 126  # as the exec stage's: the program could not be confined


class _SockFprog(ctypes.Structure):
    """struct sock_fprog, made once in the server: a class made in each child costs ~50 us."""
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _fail(code, what):
    try:
        os.write(2, b"coderun sandbox: " + what.encode("utf-8", "replace") + b"\n")
    finally:
        os._exit(code)


def _enter_namespaces(libc):
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(NAMESPACES) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", "0 %d 1" % uid), ("gid_map", "0 %d 1" % gid)):
        with open("/proc/self/" + name, "w") as f:
            f.write(text)


def contain(libc, argv, env, nfds):
    """In the server's child, fds 0..nfds-1 in place: returns the program's argv in P, never elsewhere."""
    try:
        sep = argv.index(b"--")
        prog = argv[sep + 1:]
        if len(prog) < 2:
            raise ValueError("no program")
        _enter_namespaces(libc)
        init = os.fork()
    except (OSError, ValueError) as e:
        _fail(INIT_FAILED, "fork server: %s" % e)
    if init == 0:
        _init(libc, argv, sep, env, nfds)
        return prog[1:]
    _wait_like(init, nfds)


def _wait_like(init, nfds):
    """C: hold nothing of the run, outlive every signal but SIGKILL, end as the init ended."""
    # Blocked, not ignored one by one: one system call where 60-odd sigactions cost ~0.15 ms.
    _signal.pthread_sigmask(_signal.SIG_BLOCK, _signal.valid_signals())
    os.closerange(0, nfds)
    while True:
        try:
            _, status = os.waitpid(init, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != _signal.SIGKILL:  # whose action cannot be set: signal() would raise
            _signal.signal(sig, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _init(libc, argv, sep, env, nfds):
    """I, PID 1: fork the program, then become the daemon's init; returns in P only."""
    try:
        libc.prctl(PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0)
        mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        prog = os.fork()
    except OSError as e:
        _fail(INIT_FAILED, "fork server: %s" % e)
    if prog == 0:
        mine.close()
        _confine(libc, theirs, nfds)
        return
    try:
        theirs.close()
        os.dup2(mine.fileno(), 3)  # the init's line to P; P holds the run's own fd 3
        mine.close()
        cmd = argv[1:sep] + [b"prog=%d" % prog] + argv[sep:]
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
