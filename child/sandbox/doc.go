//go:build linux

// Package sandbox is tier sandbox (docs/containment.md §2–§3): Start runs a program like
// child.Start, but as the child of a minimal init (the helper binary, see
// init_linux.go and helperbin_linux.go) in new user, PID, network, mount, IPC and UTS
// namespaces, confined by no_new_privs, Landlock (landlock_linux.go), a
// seccomp filter (seccomp_linux.go) and a per-run process bound (a pids
// cgroup for a root daemon, cgroup_linux.go; RLIMIT_NPROC otherwise) with
// RLIMIT_NOFILE, RLIMIT_FSIZE and RLIMIT_SIGPENDING, all applied by one
// function, confine. The init masks /proc files that describe the host, sets
// the run's namespace limits to 0 (a run makes no namespace) and bounds the
// CPU of the whole run by the program's RLIMIT_CPU (cpu_linux.go). Probe and Features
// check that the kernel provides all of it (features_linux.go). A
// persistent session's namespaces hold its interpreter and the forks of it,
// each a Process of its own, until the last is gone (session_linux.go,
// docs/containment-start-modes.md §4.2). What this defends against, and what it leaves,
// is docs/threat-model.md.
//
// The init and the exec stage run only in a binary whose main (or TestMain)
// calls reexec.Dispatch (or HelperMain) first. That is the lean
// cmd/coderun-sandbox-init when the daemon embeds it (child/sandbox/leaninit,
// run from a sealed memory file: helperbin_linux.go says why embedded rather
// than a file next to the daemon), else the binary this package is in.
package sandbox
