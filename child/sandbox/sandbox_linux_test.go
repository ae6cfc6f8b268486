//go:build linux

package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/childtest"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

func TestSandboxFeatures(t *testing.T) {
	leakcheck.Check(t)
	for _, f := range Features() {
		t.Logf("%-5v %s: %s", f.OK, f.Name, f.Detail)
		if !f.OK {
			t.Errorf("feature missing on the CI machine: %s (%s)", f.Name, f.Detail)
		}
	}
	if err := Probe(); err != nil {
		t.Fatal(err)
	}
}

func TestSandboxNamespacesAreReal(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	const script = `import json, os, socket
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "host": socket.gethostname(),
  "pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0),
  "uidmap": open("/proc/self/uid_map").read().split(),
  "gidmap": open("/proc/self/gid_map").read().split(),
  "ifaces": [n for _, n in socket.if_nameindex()],
  "procs": sorted(int(d) for d in os.listdir("/proc") if d.isdigit()),
  "fds": sorted(int(d) for d in os.listdir("/proc/self/fd"))}))`
	r := runPython(t, &sb, script)
	if r.exit.Code != 0 {
		t.Fatalf("exit %+v, stderr %q", r.exit, r.stderr)
	}
	var got struct {
		UID, GID, Pid, Ppid, Pgid int
		Host                      string
		UIDMap, GIDMap, Ifaces    []string
		Procs, Fds                []int
	}
	mustJSON(t, r, &got)
	wantMap := func(id int) []string { return []string{"0", strconv.Itoa(id), "1"} }
	if got.UID != 0 || got.GID != 0 || fmt.Sprint(got.UIDMap) != fmt.Sprint(wantMap(os.Getuid())) ||
		fmt.Sprint(got.GIDMap) != fmt.Sprint(wantMap(os.Getgid())) {
		t.Errorf("ids: uid %d gid %d uid_map %v gid_map %v; want 0, 0 and one-id maps onto %d/%d",
			got.UID, got.GID, got.UIDMap, got.GIDMap, os.Getuid(), os.Getgid())
	}
	if host, _ := os.Hostname(); got.Host != sandboxHostname || host == sandboxHostname {
		t.Errorf("hostname inside %q (outside %q), want %q", got.Host, host, sandboxHostname)
	}
	// The init's threads take pids too, so the program's is small but not 2.
	if got.Pid <= 1 || got.Pid > 64 || got.Ppid != 1 || got.Pgid != 1 {
		t.Errorf("pid %d ppid %d pgid %d, want a small pid, 1 (the init) and the init's group 1", got.Pid, got.Ppid, got.Pgid)
	}
	if fmt.Sprint(got.Procs) != fmt.Sprint([]int{1, got.Pid}) {
		t.Errorf("/proc inside lists %v, want only the init and the program", got.Procs)
	}
	if fmt.Sprint(got.Fds) != "[0 1 2 3 4]" { // 4: listdir's own
		t.Errorf("descriptors %v, want 0-3 (and listdir's)", got.Fds)
	}
	if fmt.Sprint(got.Ifaces) != "[lo]" {
		t.Errorf("interfaces %v, want only lo", got.Ifaces)
	}
}

func TestSandboxNoNetwork(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 4)
	go acceptAll(ln, accepted)
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	const script = `import socket, sys
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print("connected")
except OSError as e:
    print("failed", e.errno)`

	if r := runPython(t, nil, script, port); strings.TrimSpace(r.stdout) != "connected" {
		t.Fatalf("tier process: %q (stderr %q), want a connection", r.stdout, r.stderr)
	}
	<-accepted
	r := runPython(t, &sb, script, port)
	if !strings.HasPrefix(r.stdout, "failed") {
		t.Fatalf("tier sandbox: %q (stderr %q), want a failed connect", r.stdout, r.stderr)
	}

	// A host unix socket the program can name is out of reach too
	// (pathname and abstract); socketpair still works.
	sock := filepath.Join(t.TempDir(), "host.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	go acceptAll(uln, accepted)
	os.Chmod(filepath.Dir(sock), 0o755)
	unixScript := attemptPrelude + `import socket, sys
def pair():
    a, b = socket.socketpair()
    a.send(b"x")
    assert b.recv(1) == b"x"
def connect(addr):
    s = socket.socket(socket.AF_UNIX)
    s.connect(addr)
print(json.dumps({"pathname": attempt(lambda: connect(sys.argv[1])),
  "abstract": attempt(lambda: connect("\0coderun-test")),
  "udp": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9))),
  "socketpair": attempt(pair)}))`
	if r := runPython(t, nil, unixScript, sock); !strings.Contains(r.stdout, `"pathname": "ok"`) {
		t.Fatalf("tier process: %q %q, want the unix connect to work", r.stdout, r.stderr)
	}
	<-accepted
	r = runPython(t, &sb, unixScript, sock)
	var got map[string]string
	mustJSON(t, r, &got)
	want := map[string]string{"pathname": "PermissionError", "abstract": "PermissionError", "socketpair": "ok"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s, want %s", k, got[k], w)
		}
	}
	if got["udp"] == "ok" {
		t.Error("udp: a datagram left the sandbox")
	}
	select {
	case <-accepted:
		t.Fatal("the listener accepted a connection from the sandbox")
	case <-time.After(50 * time.Millisecond):
	}
}

func TestSandboxFilesystem(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	other := t.TempDir() // another run's directory
	secret := filepath.Join(other, "secret")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	script := attemptPrelude + `import os, sys
def write(p):
    with open(p, "w") as f:
        f.write("x")
def read(p):
    with open(p, "rb") as f:
        f.read(1)
other, secret, daemon = sys.argv[1:4]
print(json.dumps({
  "write-inside": attempt(lambda: write(os.path.join(os.getcwd(), "f"))),
  "mkdir-inside": attempt(lambda: os.mkdir(os.path.join(os.environ["TMPDIR"], "d"))),
  "read-inside": attempt(lambda: read(os.path.join(os.getcwd(), "f"))),
  "write-tmp": attempt(lambda: write("/tmp/coderun-sandbox-escape")),
  "write-other-run": attempt(lambda: write(os.path.join(other, "g"))),
  "read-other-run": attempt(lambda: read(secret)),
  "list-root": attempt(lambda: os.listdir("/root")),
  "read-shadow": attempt(lambda: read("/etc/shadow")),
  "read-passwd": attempt(lambda: read("/etc/passwd")),
  "read-daemon": attempt(lambda: read(daemon)),
  "read-stdlib": attempt(lambda: read(os.__file__)),
  "write-stdlib": attempt(lambda: write(os.path.join(os.path.dirname(os.__file__), "coderun-escape.py"))),
  "urandom": attempt(lambda: read("/dev/urandom")),
  "devnull": attempt(lambda: write("/dev/null")),
  "shm": attempt(lambda: __import__("multiprocessing").Lock()),
  "shm-host": str(os.listdir("/dev/shm")),
}))`
	r := runPython(t, &sb, script, other, secret, self)
	if r.exit.Code != 0 {
		t.Fatalf("exit %+v, stderr %q", r.exit, r.stderr)
	}
	var got map[string]string
	mustJSON(t, r, &got)
	want := map[string]string{
		"write-inside": "ok", "mkdir-inside": "ok", "read-inside": "ok", "read-stdlib": "ok",
		"urandom": "ok", "devnull": "ok", "shm": "ok", "shm-host": "[]",
		"write-tmp": "PermissionError", "write-other-run": "PermissionError",
		"read-other-run": "PermissionError", "list-root": "PermissionError",
		"read-shadow": "PermissionError", "read-passwd": "PermissionError",
		"read-daemon": "PermissionError", "write-stdlib": "PermissionError",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s, want %s", k, got[k], w)
		}
	}
	if _, err := os.Stat("/tmp/coderun-sandbox-escape"); err == nil {
		os.Remove("/tmp/coderun-sandbox-escape")
		t.Error("the sandbox wrote /tmp/coderun-sandbox-escape")
	}
}

func TestSandboxLimits(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	sb.MaxFiles, sb.MaxFileBytes = 100, 4096
	const script = `import json, os, resource
lim = {n: resource.getrlimit(getattr(resource, "RLIMIT_" + n)) for n in ("NOFILE", "FSIZE", "NPROC")}
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1000, 1000))
    raised = "raised"
except (OSError, ValueError) as e:
    raised = e.__class__.__name__
try:
    with open("big", "wb") as f:
        f.write(b"x" * 8192)
    big = "wrote"
except OSError as e:
    big = e.__class__.__name__ + " " + str(e.errno)
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    opened = e.errno
print(json.dumps({"lim": lim, "raise": raised, "big": big, "size": os.path.getsize("big"), "emfile": opened}))`
	r := runPython(t, &sb, script)
	if r.exit.Code != 0 {
		t.Fatalf("exit %+v, stderr %q", r.exit, r.stderr)
	}
	var got struct {
		Lim          map[string][2]int64
		Raise, Big   string
		Size, EMFILE int64
	}
	mustJSON(t, r, &got)
	if got.Lim["NOFILE"] != [2]int64{100, 100} || got.Lim["FSIZE"] != [2]int64{4096, 4096} {
		t.Errorf("limits %v", got.Lim)
	}
	if got.Raise == "raised" {
		t.Error("the program raised its hard RLIMIT_NOFILE")
	}
	if got.Size != 4096 || got.EMFILE != int64(unix.EMFILE) {
		t.Errorf("file of %d bytes (%s), open stopped with errno %d; want 4096 and EMFILE", got.Size, got.Big, got.EMFILE)
	}
}

// nsProcs lists the host pids of the processes in the PID namespace whose
// /proc/<pid>/ns/pid link is ns.
func nsProcs(ns string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestSandboxSetsidGrandchildDiesWithTheRun(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	// The grandchild leaves the group with setsid (a double fork), keeps
	// the pipes and fd 3 open, reports on fd 3 and sleeps forever.
	const script = `import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(3, b"%d\n" % os.getpid())
        os.write(w, b"x")
        time.sleep(3600)
    os._exit(0)
os.wait()
os.read(r, 1)
`
	p, _ := startPython(t, &sb, script)
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.Pid))
	if err != nil {
		t.Fatal(err)
	}
	line := childtest.ReadLine(t, p.Conn, 10*time.Second)
	if line == "" {
		t.Fatal("no grandchild pid")
	}
	start := time.Now()
	r := finish(t, p, 10*time.Second)
	if r.exit.Code != 0 || r.exit.Signaled {
		t.Fatalf("exit %+v, want the program's own 0; stderr %q", r.exit, r.stderr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the pipes reached end of stream %v after the program exited", d)
	}
	if left := nsProcs(ns); len(left) > 0 {
		t.Fatalf("processes %v of the run's PID namespace outlived it", left)
	}
}

func TestSandboxForkBomb(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	sb.MaxProcs = 24
	// Every process forks as fast as it can; the leader, once refused and
	// after half a second, reports how often it was refused and exits 3.
	// With a cgroup, pids.current never passes pids.max; with RLIMIT_NPROC
	// the kernel refuses the fork.
	const script = `import os, sys, time
leader = os.getpid()
start = time.time()
end = start + 10
refused = 0
while time.time() < end:
    try:
        os.fork()
    except OSError as e:
        refused += 1
        time.sleep(0.001)
        if os.getpid() == leader and time.time() > start + 0.5:
            break
if os.getpid() == leader:
    print(refused, flush=True)
    os._exit(3)
time.sleep(3600)
`
	p, _ := startPython(t, &sb, script)
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.Pid))
	if err != nil {
		t.Fatal(err)
	}
	peak := 0
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			n := 0
			for _, pid := range nsProcs(ns) {
				if pid == p.Pid {
					continue // the init's threads are not the program's
				}
				e, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
				n += len(e)
			}
			peak = max(peak, n)
		}
	}()
	r := finish(t, p, 20*time.Second)
	close(stop)
	<-sampled
	if r.exit.Code != 3 {
		t.Fatalf("exit %+v, want the leader's 3; stdout %q stderr %q", r.exit, r.stdout, r.stderr)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(r.stdout)); n == 0 {
		t.Errorf("no fork was refused (stdout %q)", r.stdout)
	}
	if peak > sb.MaxProcs {
		t.Errorf("the run reached %d tasks with MaxProcs %d", peak, sb.MaxProcs)
	}
	if left := nsProcs(ns); len(left) > 0 {
		t.Fatalf("processes %v of the fork bomb outlived the run", left)
	}
	t.Logf("peak %d program tasks, %s forks refused", peak, strings.TrimSpace(r.stdout))
	// The machine and the next run are fine.
	if r := runPython(t, &sb, `print("next")`); strings.TrimSpace(r.stdout) != "next" || r.exit.Code != 0 {
		t.Fatalf("next run: %+v %q %q", r.exit, r.stdout, r.stderr)
	}
}

func TestSandboxRelaysProgramStatus(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	t.Run("exit code", func(t *testing.T) {
		r := runPython(t, &sb, `raise SystemExit(7)`)
		if r.exit.Code != 7 || r.exit.Signaled {
			t.Fatalf("exit %+v, want 7", r.exit)
		}
	})
	t.Run("self signal and rusage", func(t *testing.T) {
		// Burn CPU, then die by SIGXCPU sent to itself: the default
		// action must apply (the program is not PID 1).
		r := runPython(t, &sb, `import os, signal, time
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
os.kill(os.getpid(), signal.SIGXCPU)
time.sleep(5)`)
		if !r.exit.Signaled || r.exit.Signal != "SIGXCPU" {
			t.Fatalf("exit %+v, want the program's own SIGXCPU", r.exit)
		}
		if r.exit.CPU < 250*time.Millisecond || r.exit.MaxRSSKb == 0 {
			t.Errorf("rusage CPU %v maxrss %d, want the program's", r.exit.CPU, r.exit.MaxRSSKb)
		}
	})
	t.Run("group SIGTERM", func(t *testing.T) {
		p, _ := startPython(t, &sb, `import os, time
os.write(3, b"ready\n")
time.sleep(60)`)
		childtest.ReadLine(t, p.Conn, 10*time.Second)
		stop := p.Terminate(5 * time.Second)
		r := finish(t, p, 10*time.Second)
		if !stop() {
			t.Error("the SIGKILL escalation fired: SIGTERM did not end the run")
		}
		if !r.exit.Signaled || r.exit.Signal != "SIGTERM" {
			t.Fatalf("exit %+v, want the program's SIGTERM", r.exit)
		}
		if !p.GroupEmpty() {
			t.Error("group not empty after the run")
		}
	})
	t.Run("group SIGKILL", func(t *testing.T) {
		p, _ := startPython(t, &sb, `import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.write(3, b"ready\n")
time.sleep(60)`)
		childtest.ReadLine(t, p.Conn, 10*time.Second)
		p.SignalGroup(syscall.SIGKILL)
		r := finish(t, p, 10*time.Second)
		if !r.exit.Signaled || r.exit.Signal != "SIGKILL" {
			t.Fatalf("exit %+v, want SIGKILL", r.exit)
		}
	})
}

func TestSandboxStartErrors(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	dir := t.TempDir()
	cases := []struct {
		name string
		spec child.Spec
		sb   Config
	}{
		{"missing interpreter", child.Spec{Path: filepath.Join(dir, "nope"), Dir: dir}, sb},
		{"relative interpreter", child.Spec{Path: "python3", Dir: dir}, sb},
		{"not executable", child.Spec{Path: "/etc/passwd", Dir: dir}, sb},
		{"no run directory", child.Spec{Path: "/bin/sh"}, sb},
		{"missing run directory", child.Spec{Path: "/bin/sh", Dir: filepath.Join(dir, "gone")}, sb},
		{"no limits", child.Spec{Path: "/bin/sh", Dir: dir}, Config{}},
	}
	for _, c := range cases {
		if p, err := Start(c.spec, c.sb); err == nil {
			childtest.Discard(p)
			t.Errorf("%s: started", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

// TestSandboxNprocDoesNotBoundRoot pins why a root daemon needs the pids
// cgroup: the namespace's root is mapped to global root, and the kernel
// exempts global root from RLIMIT_NPROC.
func TestSandboxNprocDoesNotBoundRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root")
	}
	leakcheck.Check(t)
	sb := testSandbox(t)
	sb.MaxProcs = 8
	testNoCgroup = true
	defer func() { testNoCgroup = false }()
	r := runPython(t, &sb, `import os, resource
kids = []
try:
    for _ in range(40):
        pid = os.fork()
        if pid == 0:
            import time; time.sleep(2); os._exit(0)
        kids.append(pid)
except OSError:
    pass
print(resource.getrlimit(resource.RLIMIT_NPROC)[0], len(kids))
for k in kids:
    os.kill(k, 9)`)
	var lim, forked int
	fmt.Sscan(r.stdout, &lim, &forked)
	t.Logf("RLIMIT_NPROC %d, forked %d (stderr %q)", lim, forked, r.stderr)
	if forked < 40 {
		t.Fatalf("RLIMIT_NPROC %d stopped root at %d forks: the cgroup may not be needed", lim, forked)
	}
}

// acceptAll accepts and closes connections until ln is closed, signalling
// each on accepted.
func acceptAll(ln net.Listener, accepted chan<- struct{}) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		accepted <- struct{}{}
		c.Close()
	}
}
