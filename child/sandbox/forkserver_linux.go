//go:build linux

package sandbox

import (
	"encoding/binary"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/forkserver"
	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"golang.org/x/sys/unix"
)

// A sandboxed run can also be forked from a fork server started with
// --sandbox (py/forkserver.py, py/sandboxfork.py), which skips the
// interpreter's start-up and the exec stage's re-execution of this binary.
// The server makes the run's first process I with one clone() into new user,
// PID, mount, IPC, UTS and network namespaces (PID 1 at once); I forks the
// program (a fork of the server's interpreter) and execs this binary's fork
// init:
//
//	daemon ──Spawn(fds 0-3, relay, cgroups, binary)──► server
//	  server: clone(all six) ──► I (PID 1, session leader)
//	  I: one-id maps, fork ──► P (program)
//	  I: execve(this binary, forkinit) with fd 3 a socket to P:
//	     prepareNamespace; P into the run's cgroups; P's rlimits (prlimit);
//	     P's Landlock ruleset built here, sent to P with the seccomp filter
//	  P: no_new_privs, landlock_restrict_self(ruleset), seccomp(filter);
//	     then bootstrap.py as any run
//	  I: watchRun and relayProgram as sandboxInit; the server reports I's
//	     end, the daemon reads the relay
//
// Every rule is the one Start applies, built by the same functions; only
// the three system calls that confine P run in P (a process can only
// confine itself).

// SpawnForked is Start through srv, a fork server started with --sandbox
// (py/forkserver.py): the same namespaces, init, limits, Landlock domain,
// seccomp filter, cgroups, relayed status and rusage, but the program is a
// fork of the server's interpreter. spec.Path is the interpreter (the
// server's), and the last of spec.Args the script the child runs. The
// returned Process is the server's child, the run's init (PID 1, the leader
// of the run's group); its Wait returns the program's relayed status, else
// the init's own. With sb.Session it is the program's instead, as Start's
// (session_linux.go): the init relays every member's end and the family's
// forks can be adopted.
func SpawnForked(srv *forkserver.Server, spec child.Spec, sb Config) (*child.Process, error) {
	if err := checkSpec(spec, sb); err != nil {
		return nil, err
	}
	if len(spec.Args) == 0 {
		return nil, fmt.Errorf("child: a forked sandbox run needs a script")
	}
	c := sandboxConf{rw: append([]string{spec.Dir}, sb.Writable...), ro: sb.ReadOnly, list: sb.Listable, exec: sb.Executable, nproc: sb.MaxProcs, nofile: sb.MaxFiles,
		fsize: sb.MaxFileBytes, session: sb.Session, proxy: sb.ProxyListener, prog: []string{spec.Path, spec.Args[len(spec.Args)-1]}}
	// PID 1 execs the helper binary through a descriptor, so it runs the
	// daemon's own helper (as Start does) even after an upgrade replaced the
	// files on disk.
	exe, err := helper().open()
	if err != nil {
		return nil, err
	}
	defer exe.Close()
	run, relayW, err := openRun(sb.MaxProcs)
	if err != nil {
		return nil, err
	}
	var extra []int
	for _, fd := range withCgroup(&c, []uintptr{uintptr(relayW)}, run.cgroup) {
		extra = append(extra, int(fd))
	}
	extra = append(extra, int(exe.Fd()))
	// The descriptor is the run's last (the server's child places them from
	// fd 4 on).
	self := "/proc/self/fd/" + strconv.Itoa(3+len(extra))
	p, err := srv.Spawn(forkserver.Spec{Argv: append([]string{self}, c.argv(forkInitArgv0)...),
		Env: spec.Env, Dir: spec.Dir, Extra: extra})
	spawn.CloseFds(relayW)
	run.cgroup.closeFiles()
	if err != nil {
		run.relay.Close()
		run.cgroup.remove()
		return nil, err
	}
	if sb.Session {
		return startMembers(p, run)
	}
	spawn.WrapReap(p, run.settleEarly)
	return p, nil
}

// settleEarly returns the program's relayed Exit as soon as the init writes
// it — every process of the run is dead by then — without waiting for the
// init's own end, which tears down the run's namespaces: that teardown, and
// the server's report of it, stay off the run's critical path (the run's
// quiescence still waits for the group to empty). Without a relay it
// returns what reap, the server's report of the init, says.
func (r *sandboxRun) settleEarly(reap func() (child.Exit, error)) (child.Exit, error) {
	type end struct {
		exit child.Exit
		err  error
	}
	own := make(chan end, 1)
	go func() {
		e, err := reap()
		own <- end{e, err}
	}()
	b := make([]byte, relaySize)
	if _, err := io.ReadFull(r.relay, b); err == nil {
		if ws, ru, ok := decodeRelay(b); ok {
			go func() { <-own; r.relay.Close(); r.cgroup.remove() }()
			return spawn.ExitOf(ws, ru), nil
		}
	}
	e := <-own
	return r.settle(e.exit, e.err)
}

// sandboxForkInit is PID 1 of a forked run's namespaces (I after its
// execve): the program c.forked is already its child and waits on fd 3 for
// its confinement. It never returns.
func sandboxForkInit(args []string) {
	c, err := parseSandboxConf(args)
	if err == nil && c.forked <= 1 {
		err = fmt.Errorf("no forked program")
	}
	if err != nil {
		stageFail(initFailed, "init: %v", err)
	}
	ignoreSignals() // as sandboxInit: only SIGKILL ends the init early
	if err := prepareForked(c); err != nil {
		stageFail(initFailed, "init: %v", err)
	}
	devNull, err := spawn.OpenDevNull()
	if err != nil {
		stageFail(initFailed, "init: %v", err)
	}
	go watchRun(c.forked, memLimitFds(c), c.session)
	for fd := 0; fd <= 2; fd++ {
		unix.Dup2(devNull, fd)
	}
	if c.session {
		relayMembers()
	}
	relayProgram(c.forked)
}

// ignoreSignals sets every signal to SIG_IGN but SIGCHLD (ignored, the
// kernel would reap the init's children before wait4 saw them) and SIGURG
// (the Go runtime's preemption). The fork init ignores where sandboxInit
// installs handlers because os/signal.Notify hands each signal to a thread
// of its own, locked, one at a time: about a sixth of the init's CPU. It
// may, because SIG_IGN is inherited across execve and this init starts no
// process: its program is already its child.
func ignoreSignals() {
	for sig := syscall.Signal(1); sig < 65; sig++ {
		if sig != unix.SIGCHLD && sig != unix.SIGURG {
			signal.Ignore(sig)
		}
	}
}

// prepareForked prepares the namespaces as sandboxInit does, bounds the
// program as confine does (cgroups, rlimits), and sends it its Landlock
// ruleset and the seccomp filter on fd 3 (a 4-byte little-endian length,
// the filter, the ruleset as SCM_RIGHTS), then closes fd 3.
func prepareForked(c sandboxConf) error {
	if err := prepareNamespace(c); err != nil {
		return err
	}
	if err := joinCgroups(c, cgroupFd, c.forked); err != nil {
		return err
	}
	if err := setSandboxLimits(c, c.forked); err != nil {
		return err
	}
	rfd, err := landlockRuleset(sandboxRules(c))
	if err != nil {
		return err
	}
	defer unix.Close(rfd)
	flt, err := seccompFilterBytes()
	if err != nil {
		return err
	}
	msg := binary.LittleEndian.AppendUint32(nil, uint32(len(flt)))
	if err := unix.Sendmsg(3, append(msg, flt...), unix.UnixRights(rfd), nil, 0); err != nil {
		return fmt.Errorf("confining the program: %w", err)
	}
	return unix.Close(3)
}
