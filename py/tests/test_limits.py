"""Resource limits, the clamp rule and the settle-time CPU recheck (docs/child-protocol-child.md §3.3)."""

import resource
import signal

from conftest import Child, run, MIB, HIJACK_PRELUDE


def test_inherited_address_space_clamps():
    """C30."""
    c = Child(rlimits={resource.RLIMIT_AS: (262144 * 1024, 262144 * 1024)})
    prog = "import resource\nreturn resource.getrlimit(resource.RLIMIT_AS)[1]"
    assert run(prog, child=c, addressSpaceBytes=512 * MIB).value == 268435456


def test_budget_too_large_for_inherited_address_space():
    """C31: no boot-ack, a done error instead."""
    c = Child(rlimits={resource.RLIMIT_AS: (131072 * 1024, 131072 * 1024)})
    c.boot(maxLogBytes=33554432, addressSpaceBytes=512 * MIB)
    res = c.serve(program="return 1")
    assert [f["type"] for f in res.frames] == ["done"]
    err = res.error
    assert err["kind"] == "exception"
    assert err["message"].startswith("bootstrap: applying resource limits failed\nValueError: ")
    assert "maxLogBytes is too large for the inherited RLIMIT_AS of 134217728 bytes" in \
        err["message"]
    assert "exceptionType" not in err and "line" not in err


def test_value_budget_rechecked_too():
    c = Child()
    c.boot(maxValueBytes=40 * MIB, addressSpaceBytes=512 * MIB)
    err = c.serve(program="return 1").error
    assert "maxValueBytes is too large for the inherited RLIMIT_AS of 536870912 bytes" in \
        err["message"]


def test_cpu_clamp_rule():
    prog = "import resource\nreturn list(resource.getrlimit(resource.RLIMIT_CPU))"
    c = Child(rlimits={resource.RLIMIT_CPU: (5, resource.RLIM_INFINITY)})
    assert run(prog, child=c, cpuSeconds=30).value == [5, 31]
    c = Child(rlimits={resource.RLIMIT_CPU: (2, 2)})
    assert run(prog, child=c, cpuSeconds=30).value == [1, 2]
    c = Child(rlimits={resource.RLIMIT_CPU: (1, 1)})
    assert run(prog, child=c, cpuSeconds=30).value == [1, 1]
    assert run(prog, cpuSeconds=9007199254740990).value == [9007199254740990,
                                                            9007199254740991]


SPIN = ("start = time.process_time()\n"
        "while time.process_time() - start < 1.05:\n"
        "    pass\n")


def killed_by_cpu(res, sig=signal.SIGXCPU):
    assert res.done is None, res.done
    assert res.signal == sig, (res.returncode, res.stderr[-500:])


def test_masked_sigxcpu_is_caught_at_settlement():
    """C34."""
    prog = ("import signal, time\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGXCPU})\n" + SPIN +
            "return 'escaped'")
    killed_by_cpu(run(prog, cpuSeconds=1))


def test_monkeypatched_primitives_do_not_defeat_the_recheck():
    """C121."""
    prog = ("import os, resource, signal, time\n"
            "signal.signal(signal.SIGXCPU, lambda *a: None)\n"
            "resource.getrusage = lambda *a: None\n"
            "os.kill = lambda *a: None\n"
            "signal.signal = lambda *a: None\n" + SPIN + "return 'escaped'")
    killed_by_cpu(run(prog, cpuSeconds=1))


def test_hijacked_globals_do_not_defeat_the_recheck():
    """C122."""
    prog = HIJACK_PRELUDE + ("import signal, time\n"
                             "signal.signal(signal.SIGXCPU, lambda *a: None)\n" + SPIN +
                             "return 'escaped'")
    killed_by_cpu(run(prog, cpuSeconds=1))


def test_reaped_descendants_are_charged():
    """C117."""
    prog = ("import subprocess, sys\n"
            "busy = 'import time\\nt = time.process_time()\\nwhile time.process_time() - t"
            " < 1.2:\\n    pass\\n'\n"
            "subprocess.run([sys.executable, '-c', busy])\n"
            "subprocess.run([sys.executable, '-c', busy])\n"
            "return 'escaped'")
    killed_by_cpu(run(prog, cpuSeconds=1, timeout=90))


def test_wall_time_is_not_cpu():
    """C118 (child side)."""
    assert run("import time\ntime.sleep(1.2)\nreturn 'slept'", cpuSeconds=1).value == "slept"


def test_exception_path_skips_the_recheck():
    prog = ("import signal, time\n"
            "signal.signal(signal.SIGXCPU, lambda *a: None)\n" + SPIN +
            "raise ValueError('after spinning')")
    err = run(prog, cpuSeconds=1).error
    assert err["exceptionType"] == "ValueError"


def test_inherited_ignored_and_blocked_sigxcpu_is_reset():
    """C35 (child level): the bootstrap resets and unblocks SIGXCPU."""
    c = Child(sigxcpu_ignored=True, sigxcpu_blocked=True)
    killed_by_cpu(run("while True:\n    pass", child=c, cpuSeconds=1))


def test_ignored_sigxcpu_meets_the_hard_limit():
    """C120: SIGKILL at the hard limit (cpuSeconds + 1)."""
    prog = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"
    killed_by_cpu(run(prog, cpuSeconds=1, timeout=30), signal.SIGKILL)


def test_closure_cell_tampering_meets_the_hard_limit():
    """C123 (white-box): replace the enforcer's captured getrusage through its cell."""
    prog = ("import signal, sys\n"
            "f = sys._getframe()\n"
            "while f.f_code.co_name != '_coderun_child':\n"
            "    f = f.f_back\n"
            "spent = f.f_locals['cpu_spent']\n"
            "cell = spent.__closure__[spent.__code__.co_freevars.index('getrusage')]\n"
            "class Zero:\n"
            "    ru_utime = ru_stime = 0.0\n"
            "cell.cell_contents = lambda *a: Zero()\n"
            "signal.signal(signal.SIGXCPU, lambda *a: None)\n"
            "while True:\n"
            "    pass")
    killed_by_cpu(run(prog, cpuSeconds=1, timeout=30), signal.SIGKILL)


def test_recheck_uses_the_soft_limit_computed_at_boot():
    """C36 (child level): the kernel raises a trapped soft limit; the recheck does not care."""
    c = Child(rlimits={resource.RLIMIT_CPU: (1, resource.RLIM_INFINITY)})
    prog = ("import signal, time\n"
            "signal.signal(signal.SIGXCPU, lambda *a: None)\n"
            "start = time.process_time()\n"
            "while time.process_time() - start < 1.3:\n"
            "    pass\n"
            "return 'escaped'")
    killed_by_cpu(run(prog, child=c, cpuSeconds=30, timeout=60))


def test_dual_inherited_cpu_limit():
    """C33 (child level): inherited soft == hard == 2 gives (1, 2): SIGXCPU first."""
    c = Child(rlimits={resource.RLIMIT_CPU: (2, 2)})
    killed_by_cpu(run("while True:\n    pass", child=c, cpuSeconds=30, timeout=60))


def test_exhausted_address_space_still_gets_its_traceback():
    """A program that fills RLIMIT_AS in small pieces still holds the memory when its
    MemoryError is settled; its frames are released so the diagnostics can be built."""
    for prog, line in (("x = []\nwhile True:\n    x.append(' ' * 100000)", 3),
                       ("def f():\n    x = []\n    while True:\n        x.append(bytearray(10000))\n"
                        "f()", 4)):
        err = run(prog, addressSpaceBytes=256 * MIB).error
        assert err["kind"] == "exception"
        assert err["exceptionType"] == "MemoryError" and err["line"] == line
        assert err["message"].startswith("Traceback (most recent call last):\n")
        assert err["message"].endswith("\nMemoryError")
