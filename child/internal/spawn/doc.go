//go:build linux

// Package spawn is the plumbing the packages under child/ share: the one
// locked spawner thread every fork runs on, close-on-exec descriptor
// helpers, a child's fds 0-3 (Stdio), the Process type with its wait4 and
// group-signalling rules and its freeze (a tree stopped with SIGSTOP,
// freeze_linux.go), /proc/<pid>/stat start times, and the hook through
// which the watchdog hears of new and emptied process groups.
//
// It starts nothing when imported: the spawner thread and the runtime poller
// start on the first fork or pollable descriptor (Warm). It is internal so
// that only child and its sub-packages (sandbox, watchdog, forkserver) build
// on it; child re-exports Spec, Process and Exit as its own.
package spawn
