//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/forkserver"
	"github.com/coderun-rpc/coderun-rpc/child/internal/childtest"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

// pyDirVar names the directory holding the repository's py/ files for a
// test binary that does not run from its package directory (the
// unprivileged re-run).
const pyDirVar = "CODERUN_TEST_PY_DIR"

// standInBootstrap is staged as the fork server's bootstrap.py: a forked
// run executes prog.py from its run directory instead of reading a boot
// frame, so these tests run any program the way a forked run starts.
const standInBootstrap = `with open("prog.py") as f:
    exec(compile(f.read(), "prog.py", "exec"), {"__name__": "__main__"})
`

// noUserNamespaces, run by the interpreter before it execs the fork server,
// moves it into a user namespace of its own that may create none: every
// clone of a sandboxed run is refused with ENOSPC.
const noUserNamespaces = `import ctypes, os, sys
uid, gid = os.getuid(), os.getgid()
if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:
    raise OSError(ctypes.get_errno(), "unshare")
for path, text in (("self/setgroups", "deny"), ("self/uid_map", "0 %d 1" % uid), ("self/gid_map", "0 %d 1" % gid),
                   ("sys/user/max_user_namespaces", "0")):
    with open("/proc/" + path, "w") as f:
        f.write(text)
os.execv(sys.executable, [sys.executable, "-u", "-I"] + sys.argv[1:])
`

// startSandboxForkServer starts the repository's fork server with --sandbox
// (forkserver.py, sandboxfork.py, protocol.py) and standInBootstrap; prelude,
// when set, runs first in the same process (python -c prelude).
func startSandboxForkServer(t *testing.T, prelude string) *forkserver.Server {
	t.Helper()
	exe, _ := testPython(t)
	src := os.Getenv(pyDirVar)
	if src == "" {
		src = filepath.Join("..", "..", "py")
	}
	dir := t.TempDir()
	copyServerFiles(t, src, dir, 0o600)
	if err := os.WriteFile(filepath.Join(dir, "bootstrap.py"), []byte(standInBootstrap), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-u", "-I", filepath.Join(dir, "forkserver.py"), "--sandbox"}
	if prelude != "" {
		args = append([]string{"-I", "-c", prelude}, args[2:]...)
	}
	s, err := forkserver.Start(child.Spec{Path: exe, Args: args, Env: []string{"TMPDIR=" + dir, leakcheck.Tag()}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// copyServerFiles copies the fork server's files of the repository (but
// its bootstrap.py) from src to dir, with mode.
func copyServerFiles(t *testing.T, src, dir string, mode os.FileMode) {
	t.Helper()
	for _, name := range []string{"forkserver.py", "sandboxfork.py", "protocol.py"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// forkRunSpec is a forked run of script in a fresh run directory.
func forkRunSpec(t *testing.T, script string) child.Spec {
	t.Helper()
	exe, _ := testPython(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prog.py"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	return child.Spec{Path: exe, Args: []string{"-u", "-I", filepath.Join(dir, "bootstrap.py")}, Dir: dir,
		Env: []string{"TMPDIR=" + dir, leakcheck.Tag()}}
}

func forkPython(t *testing.T, srv *forkserver.Server, sb *Config, script string) *child.Process {
	t.Helper()
	p, err := SpawnForked(srv, forkRunSpec(t, script), *sb)
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	return p
}

// procStat is /proc/<pid>/stat from field 3 (state) on: [1] ppid, [2] pgid, [3] session.
func procStat(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
}

// A forked run's tree is server → init → program: the server's child is
// PID 1 of the run's own namespaces and leads the run's group and session,
// and no task of the run's user namespace is outside its PID namespace
// (RLIMIT_NPROC counts every one of them).
func TestSandboxForkedTree(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	srv := startSandboxForkServer(t, "")
	p := forkPython(t, srv, &sb, `import os
print(os.getpid(), os.getppid(), flush=True)
os.read(3, 1)
`)
	if line := strings.TrimSpace(childtest.ReadLine(t, p.Stdout, 10*time.Second)); line != "2 1" {
		t.Errorf("the program's pid and parent %q, want \"2 1\" (the init's child)", line)
	}
	if st := procStat(t, p.Pid); st[1] != strconv.Itoa(srv.Pid()) || st[2] != strconv.Itoa(p.Pid) || st[3] != strconv.Itoa(p.Pid) {
		t.Errorf("the server's child %d: parent %s, group %s, session %s; want the server %d and itself",
			p.Pid, st[1], st[2], st[3], srv.Pid())
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid))
	if !strings.Contains(string(status), fmt.Sprintf("\nNSpid:\t%d\t1\n", p.Pid)) {
		t.Errorf("the server's child is not PID 1 of a PID namespace of its own:\n%s", status)
	}
	for _, ns := range []string{"user", "pid", "mnt", "net", "ipc", "uts"} {
		mine, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", p.Pid, ns))
		server, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", srv.Pid(), ns))
		if mine == "" || mine == server {
			t.Errorf("%s namespace %q, the server's %q", ns, mine, server)
		}
	}
	userNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", p.Pid))
	pidNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.Pid))
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		u, _ := os.Readlink("/proc/" + e.Name() + "/ns/user")
		if pn, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid"); u == userNS && pn != pidNS {
			t.Errorf("process %s is in the run's user namespace, outside its PID namespace", e.Name())
		}
	}
	p.Conn.Close()
	if r := finishForked(t, p); r.exit.Code != 0 || r.exit.Signaled {
		t.Fatalf("exit %+v, want the program's own 0; stderr %q", r.exit, r.stderr)
	}
}

// signalRounds sends every signal of signals to pid, rounds times, through
// a pidfd opened at once (the caller keeps pid alive meanwhile, so no other
// process is signalled).
func signalRounds(t *testing.T, pid int, signals []unix.Signal, rounds int) {
	t.Helper()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	for range rounds {
		for _, sig := range signals {
			if err := unix.PidfdSendSignal(pidfd, sig, nil, 0); err != nil {
				t.Errorf("signal %v: %v (the init ended)", sig, err)
				return
			}
		}
	}
}

// The server's child outlives every signal but SIGKILL and SIGSTOP until
// the init takes over, and the init all of them after. The server's child
// blocks them all from before the spawn returns (the interpreter's SIGINT
// handler would end it with a KeyboardInterrupt), and they are dropped at
// the init's start (PID 1 of its namespace, their action the default). One
// window is left, the init's own Go start-up before it has set their
// actions, where SIGTERM, SIGINT or SIGHUP ends it with status 2 (as it
// does a spawned run's init) and the run with it; once the program runs,
// the init outlives all of them.
func TestSandboxForkedInitOutlivesSignals(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	srv := startSandboxForkServer(t, "")
	const program = "import os\nos.read(3, 1)\nprint('ran')\n"
	for i := range 10 {
		p := forkPython(t, srv, &sb, program)
		signalRounds(t, p.Pid, []unix.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP}, 1)
		p.Conn.Close()
		r := finishForked(t, p)
		goStart := r.exit.Code == 2 && !r.exit.Signaled && r.stderr == ""
		if !goStart && (r.exit.Code != 0 || r.exit.Signaled || strings.TrimSpace(r.stdout) != "ran") {
			t.Errorf("signalled as the spawn returned, run %d: exit %+v, stdout %q, stderr %q; want the program's own 0 and \"ran\"",
				i, r.exit, r.stdout, r.stderr)
		}
	}
	p := forkPython(t, srv, &sb, "import os\nprint('ready', flush=True)\nos.read(3, 1)\nprint('ran')\n")
	if line := strings.TrimSpace(childtest.ReadLine(t, p.Stdout, 10*time.Second)); line != "ready" {
		t.Fatalf("program said %q", line)
	}
	signalRounds(t, p.Pid, []unix.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1,
		unix.SIGUSR2, unix.SIGALRM, unix.SIGPIPE, unix.SIGCHLD, unix.SIGTSTP, unix.SIGTTIN, unix.SIGXCPU}, 100)
	p.Conn.Close()
	if r := finishForked(t, p); r.exit.Code != 0 || r.exit.Signaled || strings.TrimSpace(r.stdout) != "ran" {
		t.Errorf("signalled once the program ran: exit %+v, stdout %q, stderr %q", r.exit, r.stdout, r.stderr)
	}
}

// finishForked is finish, then waits for the server to reap the init (a
// forked run settles on the relay, before the init's own end).
func finishForked(t *testing.T, p *child.Process) runResult {
	t.Helper()
	r := finish(t, p, 20*time.Second)
	for deadline := time.Now().Add(10 * time.Second); !p.GroupEmpty(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the run's group %d is not empty 10 s after its end", p.Pid)
		}
	}
	return r
}

// Where the server cannot create a user namespace (here: its own allows
// none), the spawn fails at once with the system call and the reason, and
// leaves nothing behind; the daemon then starts the child cold.
func TestSandboxForkedCloneRefused(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	srv := startSandboxForkServer(t, noUserNamespaces)
	_, err := SpawnForked(srv, forkRunSpec(t, "print('ran')"), sb)
	if err == nil || !strings.Contains(err.Error(), "clone") || !strings.Contains(strings.ToLower(err.Error()), syscall.ENOSPC.Error()) {
		t.Fatalf("spawn error %v, want clone's ENOSPC", err)
	}
	select {
	case <-srv.Done():
		t.Fatalf("the server ended: %v", srv.Err())
	default:
	}
}

// The program of a forked run may hold at most Config.MaxProcs tasks, as a
// spawned one (a pids cgroup for a root daemon, RLIMIT_NPROC otherwise),
// and no fewer than the init's own later threads take from RLIMIT_NPROC:
// the init counts the tasks of the run's PID namespace when it sets the
// limit, and no task of the run's user namespace is outside it.
func TestSandboxForkedProcessBound(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	sb.MaxProcs = 6
	srv := startSandboxForkServer(t, "")
	p := forkPython(t, srv, &sb, `import os, time
n = 1
while n < 100:
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    except OSError:
        break
    n += 1
print(n)
`)
	r := finishForked(t, p)
	n, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	if r.exit.Code != 0 || err != nil || n > sb.MaxProcs || n < sb.MaxProcs-2 {
		t.Fatalf("exit %+v, %q tasks (stderr %q); want %d, or 2 fewer at most", r.exit, r.stdout, r.stderr, sb.MaxProcs)
	}
}
