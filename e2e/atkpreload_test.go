package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// TestC1245ForkCredentialsNotInMemory: a session (a fork of the preloaded
// server) and its fork each
// hold proxy credentials of their own, and neither can read the other's out
// of its own memory (the fork is a copy of its source's at the fork), nor
// can a second fork read the first's.
func TestC1245ForkCredentialsNotInMemory(t *testing.T) {
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	u.env["CODERUN_PRELOAD"] = sessionPreload // the session is a fork of the preloaded server
	d := started(t, u.env)
	preloadReady(t, d)
	// holds says whether one of found (memoryScan's matches, which run on
	// to the next unprintable byte) has url.
	holds := func(found []string, url string) bool {
		return slices.ContainsFunc(found, func(f string) bool { return strings.Contains(f, url) })
	}
	// scan is the proxy URL of sid's environment and the others its memory holds (memoryScan).
	scan := func(sid string) (string, []string) {
		t.Helper()
		own := d.srun(sid, "import os\nreturn os.environ['HTTP_PROXY']")
		r := d.srun(sid, memoryScan)
		var pair []json.RawMessage
		var url string
		var others []string
		if own.Error != nil || r.Error != nil || json.Unmarshal(own.Value, &url) != nil || json.Unmarshal(r.Value, &pair) != nil ||
			len(pair) != 2 || json.Unmarshal(pair[1], &others) != nil {
			t.Fatalf("session %s: %s %+v, %s %+v", sid, own.Value, own.Error, r.Value, r.Error)
		}
		return url, others
	}
	src := d.open(`{}`)
	scan(src)
	fork := d.fork(src)
	forkOwn, forkFound := scan(fork)
	srcOwn, srcFound := scan(src)
	if forkOwn == srcOwn {
		t.Fatalf("the fork and its source share credentials")
	}
	if holds(forkFound, srcOwn) {
		t.Errorf("the fork's memory holds its source's current proxy credentials")
	}
	if holds(srcFound, forkOwn) {
		t.Errorf("the source's memory holds its fork's proxy credentials")
	}
	second := d.fork(src)
	if _, found := scan(second); holds(found, forkOwn) {
		t.Errorf("a second fork's memory holds the first fork's proxy credentials")
	}
}

// chrootedSource leaves a session's interpreter with its root changed to a
// directory of its own whose dev/shm is a symbolic link to the session's
// working directory, and a thread that restores the real root once a fork's
// working directory is being copied (the daemon has made the fork's rules
// by then), so that the fork itself starts from the real root. Where the
// change of root is refused, it leaves the interpreter as it was.
const chrootedSource = `import os, threading, time
cwd = os.getcwd()
for i in range(2000):
    with open("f%d" % i, "w") as f:
        f.write("x")
os.makedirs("e/dev")
os.symlink(cwd, "e/dev/shm")
real_root, here = os.open("/", os.O_PATH), os.open(cwd, os.O_PATH)
home = os.open(os.path.dirname(cwd), os.O_RDONLY | os.O_DIRECTORY)
def copying():
    for name in os.listdir(home):
        if name == os.path.basename(cwd):
            continue
        fork_home = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=home)
        try:
            for sub in os.listdir(fork_home):
                wd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fork_home)
                try:
                    if os.listdir(wd):
                        return True
                finally:
                    os.close(wd)
        finally:
            os.close(fork_home)
    return False
def restore():
    while not copying():
        time.sleep(0.0005)
    os.fchdir(real_root)
    os.chroot(".")
    os.fchdir(here)
try:
    os.chroot("e")
except PermissionError:
    return cwd
threading.Thread(target=restore, daemon=True).start()
os.fchdir(here)
return cwd`

// TestC1246ForkRulesetChroot (tier sandbox): a source (a session forked from
// the preloaded server) that changes its root
// before a session/fork cannot steer the fork's Landlock rules for the
// namespace's /dev/shm at a directory of its choosing: the fork still
// cannot write its source's directory.
func TestC1246ForkRulesetChroot(t *testing.T) {
	onlyInTier(t, "sandbox")
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_PRELOAD": sessionPreload})
	preloadReady(t, d)
	src := d.open(`{}`)
	r := d.srun(src, chrootedSource, `"limits":{"maxWallMs":60000}`)
	if r.Error != nil {
		t.Fatalf("the source's set-up: %+v", r.Error)
	}
	f := d.fork(src)
	write := fmt.Sprintf("import os\ntry:\n    open(os.path.join(%s, 'x'), 'w').close()\n    return 'wrote'\nexcept OSError as e:\n    return type(e).__name__", r.Value)
	if r := d.srun(f, write); r.Error != nil || compact(r.Value) != `"PermissionError"` {
		t.Errorf("a fork writing its chrooted source's directory: %s %+v, want PermissionError", r.Value, r.Error)
	}
}

// sniffStart, in a session, opens a raw TCP socket in its network
// namespace and leaves a thread that keeps the Proxy-Authorization lines of
// the packets it sees (seen, got); where the socket is refused, it returns
// the refusal's class.
const sniffStart = `import socket, threading
seen, got = [], threading.Event()
try:
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
except OSError as e:
    got.set()
    return type(e).__name__
def sniff():
    while True:
        data = raw.recv(65535)
        if b"Proxy-Authorization" in data:
            seen.append(data[data.index(b"Proxy-Authorization"):].split(b"\r\n")[0].decode("latin-1"))
            got.set()
threading.Thread(target=sniff, daemon=True).start()
return "sniffing"`

// TestC1247ForkSniffsSourceProxy (tier sandbox): a fork shares its
// source's network namespace and the proxy's listener there; it cannot read
// the source's proxy credentials off the loopback interface with a raw
// socket while the source makes a request.
func TestC1247ForkSniffsSourceProxy(t *testing.T) {
	onlyInTier(t, "sandbox")
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	u.env["CODERUN_PRELOAD"] = sessionPreload
	d := started(t, u.env)
	preloadReady(t, d)
	src := d.open(`{}`)
	fork := d.fork(src)
	if r := d.srun(fork, sniffStart); r.Error != nil {
		t.Fatalf("the fork's raw socket: %+v", r.Error)
	}
	url, _ := json.Marshal("http://plain.test:" + portOf(u.plain.URL) + "/")
	if r := d.srun(src, "import urllib.request\nreturn urllib.request.urlopen("+string(url)+", timeout=30).status"); r.Error != nil || compact(r.Value) != "200" {
		t.Fatalf("the source's request: %s %+v", r.Value, r.Error)
	}
	// The packets were queued on the fork's socket while the source's request ran.
	r := d.srun(fork, "got.wait(20)\nreturn seen")
	if r.Error != nil || compact(r.Value) != "[]" {
		t.Errorf("the fork read its source's proxy credentials off the loopback interface: %s %+v", r.Value, r.Error)
	}
}

// netfilterProbe asks netfilter, over netlink, to bind the program to
// packet-log group 1 (nfnetlink_log's first step to copying packets to it)
// and returns the acknowledgement's errno, or "refused" when the socket is;
// and the interfaces NETLINK_ROUTE lists.
const netfilterProbe = `import socket, struct
names = [name for _, name in socket.if_nameindex()]
try:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
except PermissionError:
    return ["refused", names]
s.bind((0, 0))
config = struct.pack("=BBH", socket.AF_INET, 0, 1) + struct.pack("=HHBxxx", 5, 1, 1)  # NFULA_CFG_CMD bind
s.send(struct.pack("=IHHII", 16 + len(config), (4 << 8) | 1, 0x1 | 0x4, 1, 0) + config)
reply = s.recv(65535)
return [struct.unpack("=i", reply[16:20])[0] if struct.unpack("=H", reply[4:6])[0] == 2 else "no ack", names]`

// TestC1248NetfilterRefused (tier sandbox): a session's program, root in a
// user namespace that owns the network namespace it shares with its forks,
// cannot configure netfilter there (a packet-log group would copy its
// family's loopback traffic to the proxy, credentials included), and still
// lists its interfaces through NETLINK_ROUTE.
func TestC1248NetfilterRefused(t *testing.T) {
	onlyInTier(t, "sandbox")
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_PRELOAD": sessionPreload})
	preloadReady(t, d)
	src := d.open(`{}`)
	if r := d.srun(src, netfilterProbe); r.Error != nil || compact(r.Value) != `["refused",["lo"]]` {
		t.Errorf("netfilter from a session: %s %+v, want [\"refused\",[\"lo\"]]", r.Value, r.Error)
	}
}
