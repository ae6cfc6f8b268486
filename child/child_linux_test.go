//go:build linux

package child_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/childtest"
	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

func TestStartDescriptorsSessionEnvDir(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	spec := childtest.HelperSpec(t, "report")
	spec.Env = append(spec.Env, "EMPTY=", "SPACES=a b  c", "NOEQUALS")
	spec.Dir = dir
	p, err := child.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { childtest.Discard(p) })
	for _, f := range []*os.File{p.Conn, p.Stdout, p.Stderr} {
		checkDaemonEnd(t, f)
	}
	r := childtest.GetReport(t, p)
	if e := childtest.WaitExit(t, p, 10*time.Second); e.Code != 0 || e.Signaled {
		t.Fatalf("report helper: %+v", e)
	}

	if r.Pid != p.Pid || r.Pgid != p.Pid || r.Sid != p.Pid {
		t.Errorf("pid %d pgid %d sid %d, want all %d", r.Pid, r.Pgid, r.Sid, p.Pid)
	}
	if r.Ppid != os.Getpid() {
		t.Errorf("ppid %d, want %d", r.Ppid, os.Getpid())
	}
	if !r.Fd0DevNull {
		t.Errorf("fd 0 is %q, not /dev/null", r.Fds[0])
	}
	for _, fd := range []int{1, 2} {
		if !strings.HasPrefix(r.Fds[fd], "pipe:") {
			t.Errorf("fd %d is %q, want a pipe", fd, r.Fds[fd])
		}
	}
	if r.Fd3Domain != unix.AF_UNIX || r.Fd3Type != unix.SOCK_STREAM {
		t.Errorf("fd 3 is %q domain %d type %d, want an AF_UNIX stream socket", r.Fds[3], r.Fd3Domain, r.Fd3Type)
	}
	for _, fd := range []int{0, 1, 2, 3} {
		if r.Nonblock[fd] {
			t.Errorf("fd %d is O_NONBLOCK in the child", fd)
		}
	}
	if extra := extraFds(r.Fds); len(extra) > 0 {
		t.Errorf("child has descriptors beyond 0-3: %v", extra)
	}
	if !slices.Equal(r.Env, spec.Env) {
		t.Errorf("env %q, want exactly %q", r.Env, spec.Env)
	}
	want, _ := filepath.EvalSymlinks(dir)
	if got, _ := filepath.EvalSymlinks(r.Cwd); got != want {
		t.Errorf("cwd %q, want %q", r.Cwd, dir)
	}
}

// checkDaemonEnd checks a daemon-side descriptor is close-on-exec and
// non-blocking (pollable), without calling Fd (which would make it blocking).
func checkDaemonEnd(t *testing.T, f *os.File) {
	t.Helper()
	sc, err := f.SyscallConn()
	if err != nil {
		t.Fatalf("%s: %v", f.Name(), err)
	}
	sc.Control(func(fd uintptr) {
		fdfl, _ := unix.FcntlInt(fd, unix.F_GETFD, 0)
		fl, _ := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if fdfl&unix.FD_CLOEXEC == 0 {
			t.Errorf("%s is not close-on-exec", f.Name())
		}
		if fl&unix.O_NONBLOCK == 0 {
			t.Errorf("%s is blocking", f.Name())
		}
	})
}

// extraFds lists descriptors beyond 0-3 that the child's own Go runtime did
// not open (it opens its poller and may open a cgroup file after exec).
func extraFds(fds map[int]string) []string {
	var extra []string
	for fd, target := range fds {
		if fd > 3 && !strings.HasPrefix(target, "anon_inode:") && !strings.HasPrefix(target, "/sys/fs/cgroup/") {
			extra = append(extra, strconv.Itoa(fd)+" -> "+target)
		}
	}
	return extra
}

func TestStartConcurrentChildrenInheritNothingExtra(t *testing.T) {
	leakcheck.Check(t)
	const n = 8
	procs := make([]*child.Process, n)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			p, err := child.Start(childtest.HelperSpec(t, "report"))
			if err != nil {
				t.Error(err)
				return
			}
			procs[i] = p
		})
	}
	wg.Wait()
	for _, p := range procs {
		if p == nil {
			continue
		}
		t.Cleanup(func() { childtest.Discard(p) })
		r := childtest.GetReport(t, p)
		if extra := extraFds(r.Fds); len(extra) > 0 {
			t.Errorf("child %d has descriptors beyond 0-3: %v", p.Pid, extra)
		}
		childtest.WaitExit(t, p, 10*time.Second)
	}
}

func TestStartErrors(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600)
	for _, tc := range []struct {
		name string
		spec child.Spec
		want error
	}{
		{"missing executable", child.Spec{Path: filepath.Join(dir, "nope")}, fs.ErrNotExist},
		{"missing dir", child.Spec{Path: childtest.TestBinary(t), Dir: filepath.Join(dir, "nodir")}, fs.ErrNotExist},
		{"not executable", child.Spec{Path: notExec}, fs.ErrPermission},
		{"NUL in an argument", child.Spec{Path: childtest.TestBinary(t), Args: []string{"a\x00b"}}, syscall.EINVAL},
		{"NUL in the environment", child.Spec{Path: childtest.TestBinary(t), Env: []string{"A=\x00"}}, syscall.EINVAL},
	} {
		p, err := child.Start(tc.spec)
		if err == nil {
			childtest.Discard(p)
			t.Errorf("%s: child.Start succeeded", tc.name)
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "fork/exec "+tc.spec.Path) {
			t.Errorf("%s: error %q, want fork/exec %s wrapping %v", tc.name, err, tc.spec.Path, tc.want)
		}
	}
}

func TestWaitExitCodeAndEndOfStream(t *testing.T) {
	leakcheck.Check(t)
	p := childtest.StartHelper(t, "exit", "3")
	e := childtest.WaitExit(t, p, 10*time.Second)
	if e.Code != 3 || e.Signaled || e.Signal != "" {
		t.Errorf("child.Exit %+v, want code 3", e)
	}
	for _, f := range []*os.File{p.Conn, p.Stdout, p.Stderr} {
		if b := childtest.ReadAllWithin(t, f, 5*time.Second); len(b) != 0 {
			t.Errorf("%s: %q before end of stream", f.Name(), b)
		}
	}
	if _, err := p.Wait(); !errors.Is(err, child.ErrWaited) {
		t.Errorf("second Wait: %v, want ErrWaited", err)
	}
}

func TestWaitReportsSignalName(t *testing.T) {
	leakcheck.Check(t)
	p := childtest.StartHelper(t, "sleep")
	childtest.ReadLine(t, p.Conn, 10*time.Second)
	p.SignalGroup(syscall.SIGKILL)
	if e := childtest.WaitExit(t, p, 5*time.Second); !e.Signaled || e.Signal != "SIGKILL" || e.Code != -1 {
		t.Errorf("child.Exit %+v, want signaled SIGKILL, code -1", e)
	}
	p = childtest.StartHelper(t, "selfsignal", "SIGTERM")
	if e := childtest.WaitExit(t, p, 10*time.Second); e.Signal != "SIGTERM" {
		t.Errorf("child.Exit %+v, want SIGTERM", e)
	}
}

func TestWaitRusage(t *testing.T) {
	leakcheck.Check(t)
	p := childtest.StartHelper(t, "burn", "300")
	e := childtest.WaitExit(t, p, 20*time.Second)
	if e.Code != 0 || e.CPU < 300*time.Millisecond || e.MaxRSSKb <= 0 {
		t.Errorf("child.Exit %+v, want code 0, CPU >= 300ms, MaxRSSKb > 0", e)
	}
}

func TestFloodWithoutNewline(t *testing.T) {
	leakcheck.Check(t)
	const n = 3 << 20
	p := childtest.StartHelper(t, "flood", strconv.Itoa(n))
	out := childtest.ReadAllWithin(t, p.Stdout, 20*time.Second)
	if e := childtest.WaitExit(t, p, 10*time.Second); e.Code != 0 {
		t.Errorf("child.Exit %+v", e)
	}
	if len(out) != n || strings.Count(string(out), "x") != n {
		t.Errorf("read %d bytes, want %d x's", len(out), n)
	}

	// Nobody reads: the child blocks on a full pipe and is still killable.
	p = childtest.StartHelper(t, "flood", "0")
	time.Sleep(200 * time.Millisecond)
	p.SignalGroup(syscall.SIGKILL)
	if e := childtest.WaitExit(t, p, 5*time.Second); e.Signal != "SIGKILL" {
		t.Errorf("child.Exit %+v, want SIGKILL", e)
	}
}

func TestTerminate(t *testing.T) {
	leakcheck.Check(t)
	t.Run("ignores SIGTERM", func(t *testing.T) {
		p := childtest.StartHelper(t, "ignore-term")
		childtest.ReadLine(t, p.Conn, 10*time.Second)
		const grace = 300 * time.Millisecond
		start := time.Now()
		stop := p.Terminate(grace)
		e := childtest.WaitExit(t, p, 5*time.Second)
		if elapsed := time.Since(start); e.Signal != "SIGKILL" || elapsed < grace {
			t.Errorf("child.Exit %+v after %v, want SIGKILL after >= %v", e, elapsed, grace)
		}
		if stop() {
			t.Error("stop() cancelled a SIGKILL that had fired")
		}
	})
	t.Run("honours SIGTERM", func(t *testing.T) {
		p := childtest.StartHelper(t, "sleep")
		childtest.ReadLine(t, p.Conn, 10*time.Second)
		stop := p.Terminate(time.Minute)
		if e := childtest.WaitExit(t, p, 5*time.Second); e.Signal != "SIGTERM" {
			t.Errorf("child.Exit %+v, want SIGTERM", e)
		}
		if !stop() {
			t.Error("stop() did not cancel the pending SIGKILL")
		}
	})
	t.Run("no grace", func(t *testing.T) {
		p := childtest.StartHelper(t, "ignore-term")
		childtest.ReadLine(t, p.Conn, 10*time.Second)
		p.Terminate(0)
		if e := childtest.WaitExit(t, p, 5*time.Second); e.Signal != "SIGKILL" {
			t.Errorf("child.Exit %+v, want SIGKILL", e)
		}
	})
}

func TestGrandchildHoldingPipes(t *testing.T) {
	leakcheck.Check(t)
	for _, mode := range []string{"group", "setsid"} {
		t.Run(mode, func(t *testing.T) {
			p := childtest.StartHelper(t, "grandchild", mode)
			gpid, err := strconv.Atoi(childtest.ReadLine(t, p.Conn, 10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if e := childtest.WaitExit(t, p, 10*time.Second); e.Code != 0 {
				t.Fatalf("leader: %+v", e)
			}
			// The leader is reaped but its pipes stay open: no end of stream.
			p.Stdout.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := p.Stdout.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("stdout read: %v, want a deadline (grandchild holds it)", err)
			}
			if mode == "group" {
				if p.GroupEmpty() {
					t.Fatal("GroupEmpty with a same-group grandchild alive")
				}
				p.SignalGroup(syscall.SIGKILL) // leader gone: the signal proceeds
			} else {
				if !p.GroupEmpty() {
					t.Fatal("group not empty though the grandchild left it")
				}
				p.SignalGroup(syscall.SIGKILL) // cannot reach it
				time.Sleep(50 * time.Millisecond)
				if st, _ := childtest.ReadState(gpid); st != "S" && st != "R" {
					t.Fatalf("setsid grandchild state %q, want alive", st)
				}
				unix.Kill(gpid, unix.SIGKILL)
			}
			if ws := childtest.ReapPid(t, gpid, 5*time.Second); ws.Signal() != syscall.SIGKILL {
				t.Errorf("grandchild status %v, want SIGKILL", ws)
			}
			if !p.GroupEmpty() {
				t.Error("group not empty after the grandchild was reaped")
			}
			childtest.ReadAllWithin(t, p.Stdout, 5*time.Second)
			childtest.ReadAllWithin(t, p.Conn, 5*time.Second)
		})
	}
}

func TestSignalGroupWithheldOnPidReuse(t *testing.T) {
	leakcheck.Check(t)
	p := childtest.StartHelper(t, "sleep")
	childtest.ReadLine(t, p.Conn, 10*time.Second)
	recorded, ok := child.StartTime(p.Pid)
	if !ok {
		t.Fatal("no start time")
	}
	// The same group, as if its pid now named another process.
	spawn.Leader(p.Pid, recorded+1).SignalGroup(syscall.SIGKILL)
	time.Sleep(100 * time.Millisecond)
	if p.GroupEmpty() {
		t.Fatal("group gone")
	}
	if st, _ := childtest.ReadState(p.Pid); st == "Z" {
		t.Fatal("signal was not withheld")
	}
	p.SignalGroup(syscall.SIGKILL)
	if e := childtest.WaitExit(t, p, 5*time.Second); e.Signal != "SIGKILL" {
		t.Errorf("child.Exit %+v", e)
	}
	if !p.GroupEmpty() {
		t.Error("group not empty after the leader was reaped")
	}
	p.SignalGroup(syscall.SIGTERM) // leader reaped, group empty: ESRCH, ignored
}

// TestPdeathsig: a "daemon" (the test binary) starts a child from a goroutine
// whose locked thread then exits; the child survives that, and dies when the
// daemon is SIGKILLed.
func TestPdeathsig(t *testing.T) {
	leakcheck.Check(t)
	d := childtest.HelperCommand(t, "daemon")
	out, err := d.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Process.Kill(); d.Wait() })
	line := make([]byte, 32)
	n, _ := out.Read(line)
	gpid, err := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil {
		t.Fatalf("daemon said %q", line[:n])
	}
	time.Sleep(300 * time.Millisecond)
	if st, ok := childtest.ReadState(gpid); !ok || st == "Z" {
		t.Fatalf("child died with the thread that asked for it (state %q)", st)
	}
	d.Process.Kill()
	d.Wait()
	start := time.Now()
	ws := childtest.ReapPid(t, gpid, time.Second) // reparented to this subreaper
	if ws.Signal() != syscall.SIGKILL {
		t.Errorf("child status %v, want SIGKILL", ws)
	}
	t.Logf("child died %v after the daemon", time.Since(start))
}

// TestInheritedDescriptorNotPassedOn: a descriptor the daemon holds WITHOUT
// close-on-exec (as one inherited from whoever started it) does not reach
// the child.
func TestInheritedDescriptorNotPassedOn(t *testing.T) {
	leakcheck.Check(t)
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	p := childtest.StartHelper(t, "report")
	r := childtest.GetReport(t, p)
	childtest.WaitExit(t, p, 10*time.Second)
	if extra := extraFds(r.Fds); len(extra) > 0 {
		t.Errorf("child has descriptors beyond 0-3: %v", extra)
	}
}

// TestCloseReleasesBlockedRead: the daemon's ends are pollable, so closing
// one releases a goroutine blocked reading it (abandoning a pipe held open by
// an orphan).
func TestCloseReleasesBlockedRead(t *testing.T) {
	leakcheck.Check(t)
	p := childtest.StartHelper(t, "sleep")
	childtest.ReadLine(t, p.Conn, 10*time.Second)
	for _, f := range []*os.File{p.Stdout, p.Stderr, p.Conn} {
		done := make(chan error, 1)
		go func() { _, err := f.Read(make([]byte, 1)); done <- err }()
		time.Sleep(20 * time.Millisecond)
		f.Close()
		select {
		case err := <-done:
			if !errors.Is(err, os.ErrClosed) {
				t.Errorf("%s: blocked Read returned %v", f.Name(), err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: Close did not release a blocked Read", f.Name())
		}
	}
}

// TestConnBothWays: fd 3 carries bytes in both directions.
func TestConnBothWays(t *testing.T) {
	leakcheck.Check(t)
	p := childtest.StartHelper(t, "report")
	r := childtest.GetReport(t, p) // writes "go\n", reads the JSON reply
	if r.Pid != p.Pid {
		t.Fatalf("report from pid %d", r.Pid)
	}
	childtest.WaitExit(t, p, 10*time.Second)
}

// TestStartFailsCleanlyOutOfDescriptors runs child.Start in a subprocess under
// ever larger RLIMIT_NOFILE soft limits: each failure (EMFILE at any step)
// must leave no descriptor behind, and a large enough limit succeeds.
func TestStartFailsCleanlyOutOfDescriptors(t *testing.T) {
	leakcheck.Check(t)
	for _, l := range emfileSteps(t, "emfile") {
		if strings.Contains(l, "leaked") {
			t.Errorf("step: %s", l)
		}
	}
}

// TestFirstStartUnderDescriptorPressure: in a process whose first Start
// meets EMFILE, the runtime poller (whose creation failing is a fatal runtime
// error) is not created by a Start's pipe: every attempt fails cleanly until
// there is room for the poller and the child's descriptors.
func TestFirstStartUnderDescriptorPressure(t *testing.T) {
	leakcheck.Check(t)
	emfileSteps(t, "emfile-cold")
}

// emfileSteps runs an emfile helper (mode), checks that it ends started with
// every step before failing on EMFILE, and returns those steps.
func emfileSteps(t *testing.T, mode string) []string {
	t.Helper()
	out, err := childtest.HelperCommand(t, mode).Output()
	if err != nil {
		t.Fatalf("%s helper: %v\n%s", mode, err, out)
	}
	t.Logf("\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 || lines[len(lines)-1] != "started" {
		t.Fatalf("%s helper:\n%s", mode, out)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.Contains(l, "too many open files") {
			t.Errorf("step: %s", l)
		}
	}
	return lines[:len(lines)-1]
}

// TestZeroProcessSignalsNothing: kill(-0) and kill(-1) would hit the daemon's
// own group and everything it may signal; a child.Process without a real pid must
// not send them.
func TestZeroProcessSignalsNothing(t *testing.T) {
	leakcheck.Check(t)
	for _, pid := range []int{0, 1, -1} {
		p := &child.Process{Pid: pid}
		p.SignalGroup(syscall.SIGCONT) // harmless even if it escaped
		p.Terminate(0)                 // SIGKILL: the test would die
		if !p.GroupEmpty() {
			t.Errorf("child.Process{Pid: %d}.GroupEmpty() = false", pid)
		}
	}
}

// TestShellSeesOnlyFds0To3 is the strict form of the descriptor check, with a
// child whose own runtime opens nothing (dash): the shell's descriptor table
// is exactly 0-3, even though the test holds a descriptor without
// close-on-exec.
func TestShellSeesOnlyFds0To3(t *testing.T) {
	leakcheck.Check(t)
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	p, err := child.Start(child.Spec{Path: "/bin/sh", Args: []string{"-c", "exec 2>&1; /bin/ls /proc/$$/fd"}, Env: []string{leakcheck.Tag()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { childtest.Discard(p) })
	out := childtest.ReadAllWithin(t, p.Stdout, 10*time.Second)
	if e := childtest.WaitExit(t, p, 10*time.Second); e.Code != 0 {
		t.Fatalf("sh: %+v", e)
	}
	if string(out) != "0\n1\n2\n3\n" {
		t.Errorf("the shell's descriptors: %q, want 0-3", out)
	}
}

// TestFreezeFamily: Freeze stops the child, a descendant in its group and
// a descendant that left it with setsid(), and returns once all three are
// stopped; Thaw continues exactly those; a frozen group still dies by
// SIGKILL.
func TestFreezeFamily(t *testing.T) {
	leakcheck.Check(t)
	p := childtest.StartHelper(t, "family")
	var same, away int
	if _, err := fmt.Sscan(childtest.ReadLine(t, p.Conn, 10*time.Second), &same, &away); err != nil {
		t.Fatal(err)
	}
	state := func(pid int) string { st, _ := childtest.ReadState(pid); return st }
	f := p.Freeze()
	for _, pid := range []int{p.Pid, same, away} {
		if st := state(pid); st != "T" {
			t.Errorf("pid %d frozen: state %q, want T", pid, st)
		}
	}
	f.Thaw()
	for _, pid := range []int{p.Pid, same, away} {
		if !eventuallyState(pid, "S") {
			t.Errorf("pid %d thawed: state %q, want S", pid, state(pid))
		}
	}
	p.Freeze()
	p.SignalGroup(syscall.SIGKILL)
	if e := childtest.WaitExit(t, p, 10*time.Second); e.Signal != "SIGKILL" {
		t.Errorf("frozen child killed: %+v", e)
	}
	unix.Kill(away, unix.SIGKILL)
	for _, pid := range []int{same, away} {
		if ws := childtest.ReapPid(t, pid, 5*time.Second); ws.Signal() != syscall.SIGKILL {
			t.Errorf("pid %d: status %v, want SIGKILL", pid, ws)
		}
	}
}

// eventuallyState waits up to 10 s for pid's state to be st (a thawed
// sleeper is S once it has been scheduled).
func eventuallyState(pid int, st string) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if got, _ := childtest.ReadState(pid); got == st {
			return true
		}
	}
	return false
}
