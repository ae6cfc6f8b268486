//go:build linux

// Package child is the daemon's generic Linux process supervisor: it starts a
// child with an exact argv, environment and working directory, wires fd 0 to
// /dev/null, fds 1 and 2 to pipes and fd 3 to one end of a socketpair, puts it
// in its own session with a parent-death SIGKILL, reaps it with wait4 (status
// and rusage), and signals its process group safely against PID reuse.
//
// It knows nothing of JSON or Python. It and the packages under it are the
// only ones of the module that import golang.org/x/sys:
//
//	child             Start, Process, Probe, StartTime, EffectiveSoftCPU, ForkChannel (this package)
//	child/sandbox     tier sandbox: namespaces, Landlock, seccomp, pids cgroup, its init
//	child/watchdog    the process that kills the registered groups when the daemon dies
//	child/forkserver  the client of a fork server (a child that forks children)
//	child/reexec      Dispatch: turns a re-executed binary into the sandbox init or watchdog
//	child/internal/spawn  the spawner thread, descriptors and Process, shared by all of them
//
// Imports run one way: sandbox, watchdog and forkserver build on child and
// internal/spawn; reexec on sandbox and watchdog; nothing here imports them
// back. No package starts anything when imported: the spawner thread starts
// on the first fork, and a helper process runs only through reexec.Dispatch.
//
// The package is Linux-only on purpose: every file carries a linux build
// constraint, so building the daemon for another OS fails with "build
// constraints exclude all Go files" instead of producing a binary that starts
// and misbehaves.
//
// Start-up and reaping, as seen from the daemon:
//
//	Start ──► spawner thread (locked, lives forever) ──fork/exec──► child
//	  │         marks inherited fds ≥ 3 close-on-exec     setsid, pdeathsig=KILL
//	  │            fd0=/dev/null fd1,fd2=pipes fd3=socketpair end, nothing else
//	  ├─ closes the child's ends, records /proc/<pid>/stat start time
//	  ├─ registers the group with the watchdog (if one runs)
//	  ▼
//	Process{Pid, Conn, Stdout, Stderr}
//	  SignalGroup(sig) ──► start time unchanged (or leader gone)? ──► kill(-pgid, sig)
//	  GroupEmpty()     ──► kill(-pgid, 0) == ESRCH (then unregistered)
//	  Terminate(grace) ──► SIGTERM group now, SIGKILL group after grace (stoppable)
//	  Wait()           ──► wait4(pid) ──► Exit{code|signal, CPU, MaxRSS}
//
// The parent-death signal reaches the child only. watchdog.Start (called
// once by the daemon's main) starts the watchdog: this binary re-executed in
// its own process group, fed the registered groups over a pipe only the
// daemon holds.
// When that pipe ends — the daemon died, however it died, or stopped it —
// the watchdog SIGKILLs every group still registered, so a same-group
// grandchild dies with the daemon too (package watchdog). Without a
// watchdog, registration is a no-op.
//
// Probe runs a short-lived command (the interpreter version probe) with the
// caller's environment in its own process group, bounded by a deadline.
// StartTime reads /proc/<pid>/stat field 22; EffectiveSoftCPU applies the
// child's RLIMIT_CPU clamp rule to the daemon's current limit.
package child
