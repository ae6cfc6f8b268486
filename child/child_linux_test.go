//go:build linux

package child

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// startStandIn starts this test binary as a stand-in daemon with env (and
// attr, if any; its stderr is the test's) and returns it with its stdout. At
// cleanup it is killed and reaped.
func startStandIn(t *testing.T, env []string, attr *syscall.SysProcAttr) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(testBinary(t))
	cmd.Env = env
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = attr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, out
}

func helperSpec(t *testing.T, mode string, args ...string) Spec {
	return Spec{Path: testBinary(t), Args: args, Env: []string{HelperVar + "=" + mode, leakcheck.Tag()}}
}

// startHelper starts a helper and registers a cleanup that kills its group,
// reaps it (unless the test did) and closes the daemon's ends.
func startHelper(t *testing.T, mode string, args ...string) *Process {
	t.Helper()
	p, err := Start(helperSpec(t, mode, args...))
	if err != nil {
		t.Fatalf("Start(%s): %v", mode, err)
	}
	t.Cleanup(func() { discard(p) })
	return p
}

func discard(p *Process) {
	p.SignalGroup(syscall.SIGKILL)
	p.Wait()
	closeFiles(p.Conn, p.Stdout, p.Stderr)
}

// readLine reads one line byte by byte (no read-ahead) within timeout.
func readLine(t *testing.T, f *os.File, timeout time.Duration) string {
	t.Helper()
	f.SetReadDeadline(time.Now().Add(timeout))
	defer f.SetReadDeadline(time.Time{})
	var line []byte
	b := make([]byte, 1)
	for {
		if _, err := f.Read(b); err != nil {
			t.Fatalf("reading a line from %s: %v (got %q)", f.Name(), err, line)
		}
		if b[0] == '\n' {
			return string(line)
		}
		line = append(line, b[0])
	}
}

// waitExit runs Wait with a timeout.
func waitExit(t *testing.T, p *Process, timeout time.Duration) Exit {
	t.Helper()
	type result struct {
		e   Exit
		err error
	}
	done := make(chan result, 1)
	go func() { e, err := p.Wait(); done <- result{e, err} }()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Wait: %v", r.err)
		}
		return r.e
	case <-time.After(timeout):
		p.SignalGroup(syscall.SIGKILL)
		<-done
		t.Fatalf("child %d did not exit within %v", p.Pid, timeout)
		return Exit{}
	}
}

// readAllWithin reads f to end of stream within timeout.
func readAllWithin(t *testing.T, f *os.File, timeout time.Duration) []byte {
	t.Helper()
	f.SetReadDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("reading %s to end of stream: %v", f.Name(), err)
	}
	return b
}

// reapPid waits for a (subreaped) orphan and returns its status.
func reapPid(t *testing.T, pid int, timeout time.Duration) unix.WaitStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var ws unix.WaitStatus
		n, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err != nil && err != unix.EINTR {
			t.Fatalf("wait4(%d): %v", pid, err)
		}
		if n == pid {
			return ws
		}
		if time.Now().After(deadline) {
			unix.Kill(pid, unix.SIGKILL)
			unix.Wait4(pid, &ws, 0, nil)
			t.Fatalf("process %d still alive after %v", pid, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func getReport(t *testing.T, p *Process) report {
	t.Helper()
	p.Conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := p.Conn.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	var r report
	if err := json.NewDecoder(p.Conn).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestStartDescriptorsSessionEnvDir(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	spec := helperSpec(t, "report")
	spec.Env = append(spec.Env, "EMPTY=", "SPACES=a b  c", "NOEQUALS")
	spec.Dir = dir
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { discard(p) })
	for _, f := range []*os.File{p.Conn, p.Stdout, p.Stderr} {
		checkDaemonEnd(t, f)
	}
	r := getReport(t, p)
	if e := waitExit(t, p, 10*time.Second); e.Code != 0 || e.Signaled {
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
	procs := make([]*Process, n)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			p, err := Start(helperSpec(t, "report"))
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
		t.Cleanup(func() { discard(p) })
		r := getReport(t, p)
		if extra := extraFds(r.Fds); len(extra) > 0 {
			t.Errorf("child %d has descriptors beyond 0-3: %v", p.Pid, extra)
		}
		waitExit(t, p, 10*time.Second)
	}
}

func TestStartErrors(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600)
	for _, tc := range []struct {
		name string
		spec Spec
		want error
	}{
		{"missing executable", Spec{Path: filepath.Join(dir, "nope")}, fs.ErrNotExist},
		{"missing dir", Spec{Path: testBinary(t), Dir: filepath.Join(dir, "nodir")}, fs.ErrNotExist},
		{"not executable", Spec{Path: notExec}, fs.ErrPermission},
		{"NUL in an argument", Spec{Path: testBinary(t), Args: []string{"a\x00b"}}, syscall.EINVAL},
		{"NUL in the environment", Spec{Path: testBinary(t), Env: []string{"A=\x00"}}, syscall.EINVAL},
	} {
		p, err := Start(tc.spec)
		if err == nil {
			discard(p)
			t.Errorf("%s: Start succeeded", tc.name)
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "fork/exec "+tc.spec.Path) {
			t.Errorf("%s: error %q, want fork/exec %s wrapping %v", tc.name, err, tc.spec.Path, tc.want)
		}
	}
}

func TestWaitExitCodeAndEndOfStream(t *testing.T) {
	leakcheck.Check(t)
	p := startHelper(t, "exit", "3")
	e := waitExit(t, p, 10*time.Second)
	if e.Code != 3 || e.Signaled || e.Signal != "" {
		t.Errorf("Exit %+v, want code 3", e)
	}
	for _, f := range []*os.File{p.Conn, p.Stdout, p.Stderr} {
		if b := readAllWithin(t, f, 5*time.Second); len(b) != 0 {
			t.Errorf("%s: %q before end of stream", f.Name(), b)
		}
	}
	if _, err := p.Wait(); !errors.Is(err, ErrWaited) {
		t.Errorf("second Wait: %v, want ErrWaited", err)
	}
}

func TestWaitReportsSignalName(t *testing.T) {
	leakcheck.Check(t)
	p := startHelper(t, "sleep")
	readLine(t, p.Conn, 10*time.Second)
	p.SignalGroup(syscall.SIGKILL)
	if e := waitExit(t, p, 5*time.Second); !e.Signaled || e.Signal != "SIGKILL" || e.Code != -1 {
		t.Errorf("Exit %+v, want signaled SIGKILL, code -1", e)
	}
	p = startHelper(t, "selfsignal", "SIGTERM")
	if e := waitExit(t, p, 10*time.Second); e.Signal != "SIGTERM" {
		t.Errorf("Exit %+v, want SIGTERM", e)
	}
}

func TestSignalName(t *testing.T) {
	leakcheck.Check(t)
	for sig, want := range map[syscall.Signal]string{
		syscall.SIGXCPU: "SIGXCPU", syscall.SIGSEGV: "SIGSEGV", 34: "SIGRTMIN",
		35: "SIGRTMIN+1", 64: "SIGRTMAX", 99: "SIG99",
	} {
		if got := signalName(sig); got != want {
			t.Errorf("signalName(%d) = %q, want %q", int(sig), got, want)
		}
	}
}

func TestWaitRusage(t *testing.T) {
	leakcheck.Check(t)
	p := startHelper(t, "burn", "300")
	e := waitExit(t, p, 20*time.Second)
	if e.Code != 0 || e.CPU < 300*time.Millisecond || e.MaxRSSKb <= 0 {
		t.Errorf("Exit %+v, want code 0, CPU >= 300ms, MaxRSSKb > 0", e)
	}
}

func TestFloodWithoutNewline(t *testing.T) {
	leakcheck.Check(t)
	const n = 3 << 20
	p := startHelper(t, "flood", strconv.Itoa(n))
	out := readAllWithin(t, p.Stdout, 20*time.Second)
	if e := waitExit(t, p, 10*time.Second); e.Code != 0 {
		t.Errorf("Exit %+v", e)
	}
	if len(out) != n || strings.Count(string(out), "x") != n {
		t.Errorf("read %d bytes, want %d x's", len(out), n)
	}

	// Nobody reads: the child blocks on a full pipe and is still killable.
	p = startHelper(t, "flood", "0")
	time.Sleep(200 * time.Millisecond)
	p.SignalGroup(syscall.SIGKILL)
	if e := waitExit(t, p, 5*time.Second); e.Signal != "SIGKILL" {
		t.Errorf("Exit %+v, want SIGKILL", e)
	}
}

func TestTerminate(t *testing.T) {
	leakcheck.Check(t)
	t.Run("ignores SIGTERM", func(t *testing.T) {
		p := startHelper(t, "ignore-term")
		readLine(t, p.Conn, 10*time.Second)
		const grace = 300 * time.Millisecond
		start := time.Now()
		stop := p.Terminate(grace)
		e := waitExit(t, p, 5*time.Second)
		if elapsed := time.Since(start); e.Signal != "SIGKILL" || elapsed < grace {
			t.Errorf("Exit %+v after %v, want SIGKILL after >= %v", e, elapsed, grace)
		}
		if stop() {
			t.Error("stop() cancelled a SIGKILL that had fired")
		}
	})
	t.Run("honours SIGTERM", func(t *testing.T) {
		p := startHelper(t, "sleep")
		readLine(t, p.Conn, 10*time.Second)
		stop := p.Terminate(time.Minute)
		if e := waitExit(t, p, 5*time.Second); e.Signal != "SIGTERM" {
			t.Errorf("Exit %+v, want SIGTERM", e)
		}
		if !stop() {
			t.Error("stop() did not cancel the pending SIGKILL")
		}
	})
	t.Run("no grace", func(t *testing.T) {
		p := startHelper(t, "ignore-term")
		readLine(t, p.Conn, 10*time.Second)
		p.Terminate(0)
		if e := waitExit(t, p, 5*time.Second); e.Signal != "SIGKILL" {
			t.Errorf("Exit %+v, want SIGKILL", e)
		}
	})
}

func TestGrandchildHoldingPipes(t *testing.T) {
	leakcheck.Check(t)
	for _, mode := range []string{"group", "setsid"} {
		t.Run(mode, func(t *testing.T) {
			p := startHelper(t, "grandchild", mode)
			gpid, err := strconv.Atoi(readLine(t, p.Conn, 10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if e := waitExit(t, p, 10*time.Second); e.Code != 0 {
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
				if st, _ := readState(gpid); st != "S" && st != "R" {
					t.Fatalf("setsid grandchild state %q, want alive", st)
				}
				unix.Kill(gpid, unix.SIGKILL)
			}
			if ws := reapPid(t, gpid, 5*time.Second); ws.Signal() != syscall.SIGKILL {
				t.Errorf("grandchild status %v, want SIGKILL", ws)
			}
			if !p.GroupEmpty() {
				t.Error("group not empty after the grandchild was reaped")
			}
			readAllWithin(t, p.Stdout, 5*time.Second)
			readAllWithin(t, p.Conn, 5*time.Second)
		})
	}
}

func readState(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0], true
}

func TestSignalGroupWithheldOnPidReuse(t *testing.T) {
	leakcheck.Check(t)
	p := startHelper(t, "sleep")
	readLine(t, p.Conn, 10*time.Second)
	if !p.hasStart {
		t.Fatal("no start time recorded")
	}
	recorded := p.startTime
	p.startTime = recorded + 1 // as if the pid now named another process
	p.SignalGroup(syscall.SIGKILL)
	time.Sleep(100 * time.Millisecond)
	if p.GroupEmpty() {
		t.Fatal("group gone")
	}
	if st, _ := readState(p.Pid); st == "Z" {
		t.Fatal("signal was not withheld")
	}
	p.startTime = recorded
	p.SignalGroup(syscall.SIGKILL)
	if e := waitExit(t, p, 5*time.Second); e.Signal != "SIGKILL" {
		t.Errorf("Exit %+v", e)
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
	d := helperCommand(t, "daemon")
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
	if st, ok := readState(gpid); !ok || st == "Z" {
		t.Fatalf("child died with the thread that asked for it (state %q)", st)
	}
	d.Process.Kill()
	d.Wait()
	start := time.Now()
	ws := reapPid(t, gpid, time.Second) // reparented to this subreaper
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
	p := startHelper(t, "report")
	r := getReport(t, p)
	waitExit(t, p, 10*time.Second)
	if extra := extraFds(r.Fds); len(extra) > 0 {
		t.Errorf("child has descriptors beyond 0-3: %v", extra)
	}
}

// TestCloseReleasesBlockedRead: the daemon's ends are pollable, so closing
// one releases a goroutine blocked reading it (abandoning a pipe held open by
// an orphan).
func TestCloseReleasesBlockedRead(t *testing.T) {
	leakcheck.Check(t)
	p := startHelper(t, "sleep")
	readLine(t, p.Conn, 10*time.Second)
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
	p := startHelper(t, "report")
	r := getReport(t, p) // writes "go\n", reads the JSON reply
	if r.Pid != p.Pid {
		t.Fatalf("report from pid %d", r.Pid)
	}
	waitExit(t, p, 10*time.Second)
}

// TestStartFailsCleanlyOutOfDescriptors runs Start in a subprocess under
// ever larger RLIMIT_NOFILE soft limits: each failure (EMFILE at any step)
// must leave no descriptor behind, and a large enough limit succeeds.
func TestStartFailsCleanlyOutOfDescriptors(t *testing.T) {
	leakcheck.Check(t)
	out, err := helperCommand(t, "emfile").Output()
	if err != nil {
		t.Fatalf("emfile helper: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 || lines[len(lines)-1] != "started" {
		t.Fatalf("emfile helper:\n%s", out)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.Contains(l, "too many open files") || strings.Contains(l, "leaked") {
			t.Errorf("step: %s", l)
		}
	}
	t.Logf("\n%s", out)
}

// TestZeroProcessSignalsNothing: kill(-0) and kill(-1) would hit the daemon's
// own group and everything it may signal; a Process without a real pid must
// not send them.
func TestZeroProcessSignalsNothing(t *testing.T) {
	leakcheck.Check(t)
	for _, pid := range []int{0, 1, -1} {
		p := &Process{Pid: pid}
		p.SignalGroup(syscall.SIGCONT) // harmless even if it escaped
		p.Terminate(0)                 // SIGKILL: the test would die
		if !p.GroupEmpty() {
			t.Errorf("Process{Pid: %d}.GroupEmpty() = false", pid)
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
	p, err := Start(Spec{Path: "/bin/sh", Args: []string{"-c", "exec 2>&1; /bin/ls /proc/$$/fd"}, Env: []string{leakcheck.Tag()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { discard(p) })
	out := readAllWithin(t, p.Stdout, 10*time.Second)
	if e := waitExit(t, p, 10*time.Second); e.Code != 0 {
		t.Fatalf("sh: %+v", e)
	}
	if string(out) != "0\n1\n2\n3\n" {
		t.Errorf("the shell's descriptors: %q, want 0-3", out)
	}
}

func TestCloexecFallback(t *testing.T) {
	leakcheck.Check(t)
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cloexecByProcFd()
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fl&unix.FD_CLOEXEC == 0 {
		t.Error("fd not marked close-on-exec")
	}
	if fl, _ := unix.FcntlInt(2, unix.F_GETFD, 0); fl&unix.FD_CLOEXEC != 0 {
		t.Error("fd 2 marked close-on-exec")
	}
}
