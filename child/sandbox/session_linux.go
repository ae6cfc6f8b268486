//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
)

// A persistent session's namespaces (Config.Session) hold a family: the
// session's interpreter and the forks of it (docs/child-protocol-sessions.md §6.6).
// Every member is a child of the namespace's init — a fork is born one
// (clone(CLONE_PARENT)) or orphaned to it — and leads its own process
// group, so that one member's group kill spares the init and the others.
// The init relays the end of every child it reaps (relayMembers); the
// daemon keeps a member's record for its Wait, and SIGKILLs the init — and
// with it the namespaces and whatever is left in them — once the last
// member has been reaped.
//
// The Process Start returns for a session is the interpreter's: its group
// is the interpreter's own, its Wait the interpreter's relayed status and
// rusage, and its Adopt claims a fork of any member by the pid the fork
// reports (its pid in the namespace).
//
// Each member is frozen between its runs (spawn.Process.Freeze: its group
// and its descendants). The family's orphans — processes a member's program
// orphaned (a double fork), which the init took in — belong to no member:
// they are stopped while every member is frozen, and continued as soon as
// one member is not (memberFrozen).

// memberWait bounds the wait for the session's interpreter to appear (the
// init forks it at once) and to lead its own group.
var memberWait = 10 * time.Second

// family is one session namespace's members.
type family struct {
	holder *child.Process // the init, the daemon's child
	run    *sandboxRun

	mu      sync.Mutex
	waiting map[int]chan child.Exit // by pid in the namespace: members not yet reaped
	known   map[int]bool            // host pids of members, ever
	live    int                     // members not yet reaped
	awake   map[int]bool            // by host pid: members not yet reaped, true unless frozen
	ended   bool                    // the relay ended: the init is gone
	done    chan struct{}           // closed once the init is reaped and the run released

	freezeMu sync.Mutex    // serialises the orphans' freeze and thaw; taken before mu
	orphans  *spawn.Frozen // the family's orphans while every member is frozen
}

// killedExit is a member's end when the init died before relaying it.
var killedExit = child.Exit{Code: -1, Signaled: true, Signal: "SIGKILL"}

// startMembers makes the session interpreter, the init's child, the first
// member of holder's namespace and returns its Process. On error the init
// is killed and reaped and nothing is left open.
func startMembers(holder *child.Process, run *sandboxRun) (*child.Process, error) {
	f := &family{holder: holder, run: run, waiting: map[int]chan child.Exit{}, known: map[int]bool{},
		awake: map[int]bool{}, done: make(chan struct{})}
	go f.demux()
	host, err := f.firstMember()
	if err == nil {
		var p *child.Process
		if p, err = f.member(host); err == nil {
			p.Conn, p.Stdout, p.Stderr = holder.Conn, holder.Stdout, holder.Stderr
			return p, nil
		}
	}
	holder.SignalGroup(syscall.SIGKILL)
	<-f.done
	spawn.CloseFiles(holder.Conn, holder.Stdout, holder.Stderr)
	return nil, fmt.Errorf("child: starting the session's sandbox: %w", err)
}

// firstMember waits for the init's child to lead its own process group
// (the exec stage's setpgid, before the interpreter's execve) and returns
// its host pid.
func (f *family) firstMember() (int, error) {
	deadline := time.Now().Add(memberWait)
	for time.Now().Before(deadline) {
		if f.isEnded() {
			return 0, errors.New("the init ended before its program started")
		}
		for _, c := range spawn.Children(f.holder.Pid) {
			if pgrp, _, ok := groupOf(c); ok && pgrp == c {
				return c, nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return 0, errors.New("the program did not start within " + memberWait.String())
}

// adopt claims nspid, a fork of a member, as a member: a child of the init
// that leads its own session and is no member yet.
func (f *family) adopt(nspid int) (*child.Process, error) {
	for _, c := range spawn.Children(f.holder.Pid) {
		if ns, ok := innermostPid(c); !ok || ns != nspid {
			continue
		}
		if _, sid, ok := groupOf(c); !ok || sid != c {
			return nil, fmt.Errorf("child: pid %d does not lead its own session", nspid)
		}
		return f.member(c)
	}
	return nil, fmt.Errorf("child: pid %d is not a child of the session's init", nspid)
}

// member registers host, a child of the init, and returns its Process.
func (f *family) member(host int) (*child.Process, error) {
	nspid, ok := innermostPid(host)
	if !ok {
		return nil, fmt.Errorf("child: pid %d is gone", host)
	}
	ch := make(chan child.Exit, 1)
	f.mu.Lock()
	switch {
	case f.ended:
		f.mu.Unlock()
		return nil, errors.New("child: the session's namespace has ended")
	case f.known[host]:
		f.mu.Unlock()
		return nil, fmt.Errorf("child: pid %d is already a member", nspid)
	}
	f.known[host], f.waiting[nspid], f.awake[host] = true, ch, true
	f.live++
	f.mu.Unlock()
	f.syncOrphans() // a member born awake: the orphans run
	// Registered before this check: a record of host's end reaches ch.
	start, ok := spawn.StartTime(host)
	if !ok {
		f.mu.Lock()
		delete(f.waiting, nspid)
		f.mu.Unlock()
		f.release(host)
		return nil, fmt.Errorf("child: pid %d is gone", nspid)
	}
	p := spawn.Leader(host, start)
	spawn.SetReap(p, func() (child.Exit, error) {
		e := <-ch
		f.release(host)
		return e, nil
	})
	spawn.SetAdopter(p, f.adopt)
	spawn.SetFreezeHook(p, func(frozen bool) { f.memberFrozen(host, frozen) })
	spawn.SetFamily(p, func() []int { return spawn.Tree(f.holder.Pid) })
	return p, nil
}

// release counts the end of the member host; after the last one it kills
// the init and waits for the namespace to be gone.
func (f *family) release(host int) {
	f.mu.Lock()
	f.live--
	delete(f.awake, host)
	last := f.live == 0
	f.mu.Unlock()
	if last {
		f.holder.SignalGroup(syscall.SIGKILL)
		<-f.done
		return
	}
	f.syncOrphans()
}

// memberFrozen records that the member host was frozen or is being thawed,
// and stops or continues the family's orphans to match.
func (f *family) memberFrozen(host int, frozen bool) {
	f.mu.Lock()
	if _, live := f.awake[host]; live {
		f.awake[host] = !frozen
	}
	f.mu.Unlock()
	f.syncOrphans()
}

// syncOrphans stops the family's orphans while every live member is
// frozen, and continues them otherwise. Calls are serialised and each reads
// the members' state anew, so the last call applies the latest state.
func (f *family) syncOrphans() {
	f.freezeMu.Lock()
	defer f.freezeMu.Unlock()
	f.mu.Lock()
	asleep := len(f.awake) > 0
	for _, awake := range f.awake {
		asleep = asleep && !awake
	}
	f.mu.Unlock()
	switch {
	case asleep && f.orphans == nil:
		f.orphans = spawn.FreezeAll(f.orphanTrees)
	case !asleep && f.orphans != nil:
		f.orphans.Thaw()
		f.orphans = nil
	}
}

// orphanTrees lists the init's children that are no members, and their
// descendants.
func (f *family) orphanTrees() []int {
	var out []int
	for _, c := range spawn.Children(f.holder.Pid) {
		f.mu.Lock()
		_, member := f.awake[c]
		f.mu.Unlock()
		if !member {
			out = append(out, spawn.Tree(c)...)
		}
	}
	return out
}

// demux hands each relayed record to its member until the init ends, then
// reaps the init, gives the members still waiting killedExit and releases
// the run (relay, cgroup).
func (f *family) demux() {
	b := make([]byte, memberSize)
	for {
		if _, err := io.ReadFull(f.run.relay, b); err != nil {
			break
		}
		pid, e, ok := decodeMember(b)
		if !ok {
			continue
		}
		f.mu.Lock()
		ch := f.waiting[pid]
		delete(f.waiting, pid)
		f.mu.Unlock()
		if ch != nil {
			ch <- e
		}
	}
	f.mu.Lock()
	f.ended = true
	rest := f.waiting
	f.waiting = nil
	f.mu.Unlock()
	f.holder.Wait()
	f.run.relay.Close()
	go f.run.cgroup.remove()
	for _, ch := range rest {
		ch <- killedExit
	}
	close(f.done)
}

func (f *family) isEnded() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended
}

// ForkRuleset is the Landlock ruleset a fork of a session's interpreter
// stacks on its inherited domain (docs/containment-start-modes.md §4.2): the rules of
// sb for the interpreter python with home, the fork's own tree, as the only
// writable tree besides /dev/shm. Landlock domains only narrow, so the
// fork keeps none of its source's write access beyond home. member is the
// host pid of a member of the family (the fork's source): the rules for
// the namespace's own /proc and /dev/shm, which are not the daemon's, are
// made on those mounts as member sees them (/proc/<member>/root). A
// program cannot change what those paths name (Landlock forbids it every
// change of its mount tree, the seccomp filter a change of its root);
// should member be gone and its pid reused, the rules name another
// process's mounts, which the fork cannot reach.
func ForkRuleset(sb Config, python, home string, member int) (*os.File, error) {
	c := sandboxConf{rw: []string{home}, ro: sb.ReadOnly, list: sb.Listable, exec: sb.Executable, prog: []string{python},
		nsRoot: "/proc/" + strconv.Itoa(member) + "/root"}
	fd, err := landlockRuleset(sandboxRules(c))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "landlock-ruleset"), nil
}

// groupOf reads pid's process group and session (/proc/<pid>/stat fields
// 5 and 6, in the daemon's PID namespace).
func groupOf(pid int) (pgrp, sid int, ok bool) {
	f, ok := statFields(pid, 3)
	return f[1], f[2], ok
}

// parentOf reads pid's parent (/proc/<pid>/stat field 4, in the daemon's
// PID namespace).
func parentOf(pid int) (int, bool) {
	f, ok := statFields(pid, 1)
	return f[0], ok
}

// statFields reads n numeric fields of /proc/<pid>/stat from field 4 on
// (always n values; ok false when unread).
func statFields(pid, n int) ([]int, bool) {
	out := make([]int, n)
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return out, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3
	if len(f) < n+1 {
		return out, false
	}
	for k := range out {
		v, err := strconv.Atoi(string(f[k+1]))
		if err != nil {
			return out, false
		}
		out[k] = v
	}
	return out, true
}

// innermostPid is pid's pid in its own PID namespace (the last NSpid entry).
func innermostPid(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	_, rest, _ := bytes.Cut(b, []byte("NSpid:"))
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(f[len(f)-1]))
	return n, err == nil
}
