//go:build linux

package child

import (
	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"golang.org/x/sys/unix"
)

// Spec describes one child: Path (absolute; also argv[0]), Args (argv[1:]),
// Env (the exact environment; nil means an empty one) and Dir (working
// directory; "" means the daemon's).
type Spec = spawn.Spec

// Process is a started child: Pid, and the daemon's ends Conn (fd 3),
// Stdout and Stderr, close-on-exec and registered with the runtime poller
// (deadlines work, Close releases a blocked Read or Write); the caller closes
// them. Its methods:
//
//   - Wait reaps it (once; a second call returns ErrWaited) and returns its
//     Exit, without touching the pipes.
//   - SignalGroup(sig) signals its process group, withheld when the leader's
//     pid was reused (start time changed); a Pid <= 1 signals nothing.
//   - GroupEmpty reports whether the group has no member left (an unreaped
//     leader counts), and then stops watching it.
//   - Terminate(grace) sends SIGTERM to the group now and SIGKILL after
//     grace, returning a stop function like time.Timer.Stop.
//   - Adopt(pid) claims a fork of the child's program that the child's
//     reaper took in (a fork server's child only; else ErrNotAdoptable);
//     Adoptable says beforehand whether it can.
//   - Freeze() stops the group and every descendant (SIGSTOP) and returns
//     the Frozen tree, whose Thaw continues them (an idle session's child).
type Process = spawn.Process

// Frozen is a process tree Process.Freeze stopped; Thaw continues it.
type Frozen = spawn.Frozen

// Exit is a reaped child's wait status and rusage: Code (-1 when signaled),
// Signal ("SIGKILL" …), Signaled, CPU (user+system, reaped descendants
// included) and MaxRSSKb.
type Exit = spawn.Exit

// ErrWaited is returned by a second call to Process.Wait.
var ErrWaited = spawn.ErrWaited

// ErrNotAdoptable is returned by Process.Adopt for a child whose forks no
// reaper can hand over (one started by Start rather than a fork server).
var ErrNotAdoptable = spawn.ErrNotAdoptable

// Start starts spec's program: fd 0 = /dev/null, fds 1/2 = pipes, fd 3 = the
// child's end of an AF_UNIX stream socketpair, a new session (pgid == pid) and
// a parent-death SIGKILL, and records the child's start time for SignalGroup.
// It sets no resource limits (the child applies its own).
//
// Only fds 0-3 reach the child: every daemon-side descriptor is created
// close-on-exec, and descriptors the daemon inherited without the flag are
// given it before the fork. The fork runs on the spawner thread, which lives
// as long as the daemon, so the parent-death signal fires when the daemon
// dies and not when the calling goroutine's thread exits. The child's group
// is registered with the watchdog, if one runs (see package watchdog).
//
// Errors leave nothing open: "fork/exec <path>: <errno>" (*os.PathError, so
// errors.Is(err, fs.ErrNotExist) etc. work; a missing Dir reports the same
// way) or "pipe2: …", "socketpair: …", "open /dev/null: …" (EMFILE …).
func Start(spec Spec) (*Process, error) {
	s, pid, err := spawn.StartWired(spec, unix.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	p := spawn.Started(pid, s.Conn, s.Stdout, s.Stderr)
	spawn.WatchGroup(p) // its descendants die with the daemon too
	return p, nil
}

// StartTime returns the start time of pid in clock ticks since boot
// (/proc/<pid>/stat field 22), or false when the process does not exist (a
// zombie still has one) or the file cannot be read or parsed.
func StartTime(pid int) (uint64, bool) { return spawn.StartTime(pid) }
