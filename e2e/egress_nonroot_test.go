package e2e

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// nobodyProgram reports, from inside a run: a GET of URL through the run's
// proxy, a direct connection to the upstream, a bind of the proxy's port,
// every listening socket among the program's descriptors, whether
// pidfd_getfd on the init's proxy descriptor (fd 100) succeeds, and
// whether the init still holds it once the daemon took it (waiting for the
// init to close it, up to 20 s); it then sends the init the daemon's
// signal for that again (SIGUSR1), which must change nothing.
const nobodyProgram = `import ctypes, errno, os, socket, stat, time, urllib.request
out = {}
try:
    with urllib.request.urlopen(URL, timeout=30) as r:
        out["fetch"] = r.read().decode()[:100]
except Exception as e:
    out["fetch"] = type(e).__name__ + ": " + str(e)[:300]
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=5).close()
    out["direct"] = "connected"
except OSError as e:
    out["direct"] = str(e)[:300]
s = socket.socket()
try:
    s.bind(("127.0.0.1", 3128))
    out["bind"] = "bound"
except OSError as e:
    out["bind"] = errno.errorcode.get(e.errno, str(e.errno))
s.close()
listening = []
for fd in range(1024):
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            continue
    except OSError:
        continue
    t = socket.socket(fileno=os.dup(fd))
    try:
        if t.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            listening.append(fd)
    finally:
        t.close()
out["listening"] = listening
libc = ctypes.CDLL(None, use_errno=True)
pidfd = libc.syscall(434, 1, 0)
out["getfd"] = libc.syscall(438, pidfd, 100, 0) if pidfd >= 0 else -1
if pidfd >= 0:
    os.close(pidfd)
try:
    deadline = time.monotonic() + 20
    while "100" in os.listdir("/proc/1/fd") and time.monotonic() < deadline:
        time.sleep(0.01)
    out["initFd"] = "open" if "100" in os.listdir("/proc/1/fd") else "closed"
except OSError as e:
    out["initFd"] = "unreadable: " + str(e)
try:
    os.kill(1, 10)  # the daemon's "taken" signal, again: the init must live on
except OSError:
    pass
return out
`

// canSandboxUnprivileged reports whether uid 65534 may make the sandbox's
// user and network namespaces here (some kernels or LSMs forbid it; so does
// a machine without unshare(1), which the probe runs).
func canSandboxUnprivileged() bool {
	cmd := exec.Command("unshare", "--user", "--net", "--pid", "--mount", "--fork", "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd.Run() == nil
}

// TestC1270EgressWithoutRoot: a daemon that is not root (uid 65534 when the
// suite is root) in tier sandbox with an egress policy, its children
// spawned or forked: a run reaches an allowed loopback upstream through the
// proxy, is refused a direct connection with the policy's note, cannot bind
// the proxy's port, holds no listening socket and cannot take the init's,
// which the init closes once the daemon has taken it.
func TestC1270EgressWithoutRoot(t *testing.T) {
	for _, mode := range []string{"spawn", "fork"} {
		t.Run(mode, func(t *testing.T) {
			d, u := nobodyDaemon(t, mode)
			checkNobodyRun(t, d, u, "")
		})
	}
}

// TestC1271EgressWithoutRootSession: the same daemon's session, its fork,
// and the fork once its source is closed (the listener the source's init
// made is the family's) reach the upstream through the proxy.
func TestC1271EgressWithoutRootSession(t *testing.T) {
	for _, mode := range []string{"spawn", "fork"} {
		t.Run(mode, func(t *testing.T) {
			d, u := nobodyDaemon(t, mode)
			src := d.open(`{}`)
			checkNobodyRun(t, d, u, src)
			fork := d.fork(src)
			checkNobodyRun(t, d, u, fork)
			if m := d.call("session/close", `{"sessionId":"`+src+`"}`); m.Error != nil {
				t.Fatalf("session/close: %+v", m.Error)
			}
			checkNobodyRun(t, d, u, fork)
		})
	}
}

// nobodyDaemon starts, in tier sandbox with an egress policy allowing the
// plain upstream, a daemon that is not root: the suite's own user, or
// uid 65534 when the suite is root.
func nobodyDaemon(t *testing.T, mode string) (*daemon, *egressUpstreams) {
	t.Helper()
	onlyInTier(t, "sandbox")
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	u.env["CODERUN_START_MODE"] = mode
	env := u.env
	if os.Geteuid() == 0 {
		if _, err := os.Stat("/usr/bin/python3"); err != nil {
			t.Skip("no /usr/bin/python3 for an unprivileged daemon")
		}
		if !canSandboxUnprivileged() {
			t.Skip("uid 65534 cannot make user and network namespaces here (or no unshare(1) to probe it): no unprivileged sandbox at all")
		}
		env = nobodyEnv(t, u.env)
	}
	return started(t, env), u
}

// checkNobodyRun runs nobodyProgram (in session sid unless "") and checks
// what it saw.
func checkNobodyRun(t *testing.T, d *daemon, u *egressUpstreams, sid string) {
	t.Helper()
	prog, _ := json.Marshal("URL = 'http://plain.test:" + portOf(u.plain.URL) + "/'\nPORT = " + portOf(u.plain.URL) + "\n" + nobodyProgram)
	params := `{"program":` + string(prog) + `}`
	if sid != "" {
		params = `{"sessionId":"` + sid + `","program":` + string(prog) + `}`
	}
	r, raw := d.egressRun(t, params)
	var got struct {
		Fetch, Direct, Bind, InitFd string
		Listening                   []int
		Getfd                       int
	}
	if err := json.Unmarshal(r.Value, &got); err != nil {
		t.Fatalf("result %s; stderr:\n%s", raw, d.stderr)
	}
	if got.Fetch != "upstream-ok GET" {
		t.Errorf("fetch through the proxy: %q; stderr:\n%s", got.Fetch, d.stderr)
	}
	if !strings.Contains(got.Direct, "HTTP(S) goes through the egress proxy") {
		t.Errorf("direct connection: %q, want refused with the policy's note", got.Direct)
	}
	if got.Bind == "bound" {
		t.Error("the program bound the proxy's port")
	}
	if len(got.Listening) != 0 {
		t.Errorf("the program holds listening sockets at fds %v", got.Listening)
	}
	if got.Getfd >= 0 {
		t.Errorf("the program took the init's descriptor 100 (fd %d)", got.Getfd)
	}
	if got.InitFd != "closed" {
		t.Errorf("the init's copy of the listener: %s", got.InitFd)
	}
	if len(r.Egress) != 1 || r.Egress[0].Status != 200 {
		t.Errorf("egress audit %s", raw)
	}
}

// nobodyEnv is env for a daemon run as uid 65534: its binary, temporary
// directory and egress policy in a directory that user owns, and the
// system's python.
func nobodyEnv(t *testing.T, env map[string]string) map[string]string {
	t.Helper()
	dir, err := os.MkdirTemp("", "e2e-nobody-") // not coderun-*: see leakcheck.Suite
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "coderun-rpc")
	copyFile(t, daemonBin, bin, 0o755)
	policy := filepath.Join(dir, "egress.json")
	copyFile(t, env["CODERUN_EGRESS"], policy, 0o644)
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, tmp} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{asNobody: bin, "TMPDIR": tmp, "HOME": dir, "CODERUN_PYTHON_BIN": "/usr/bin/python3",
		"CODERUN_EGRESS": policy, workDir: dir}
	for k, v := range env {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
