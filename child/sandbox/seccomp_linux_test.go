//go:build linux

package sandbox

import (
	"os"
	"runtime"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// TestSandboxSeccomp: what the filter refuses, seen from a sandboxed
// program, and that a host file it may not touch keeps its mode. File
// metadata changes fail even on the program's own files; sockets are
// limited to the namespaced families and stream pairs.
func TestSandboxSeccomp(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	host := hostFile(t, 0o600)
	script := attemptPrelude + `import os, socket, sys
open("own", "w").close()
fd = os.open(os.__file__, os.O_RDONLY)  # a read-only tree
def inotify():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.inotify_init1(0) < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
def pair(kind):
    a, b = socket.socketpair(socket.AF_UNIX, kind)
    a.close(); b.close()
print(json.dumps({
  "chmod host": attempt(lambda: os.chmod(sys.argv[1], 0o777)),
  "chmod own": attempt(lambda: os.chmod("own", 0o777)),
  "fchmod read-only": attempt(lambda: os.fchmod(fd, 0o777)),
  "chown own": attempt(lambda: os.chown("own", 0, 0)),
  "utime own": attempt(lambda: os.utime("own", (0, 0))),
  "setxattr own": attempt(lambda: os.setxattr("own", "user.x", b"1")),
  "removexattr own": attempt(lambda: os.removexattr("own", "user.x")),
  "inotify": attempt(inotify),
  "vsock": attempt(lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()),
  "packet": attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()),
  "unix dgram pair": attempt(lambda: pair(socket.SOCK_DGRAM)),
  "inet": attempt(lambda: socket.socket(socket.AF_INET).close()),
  "inet6": attempt(lambda: socket.socket(socket.AF_INET6).close()),
  "netlink": attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close()),
  "netlink usersock": attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2).close()),
  "netlink netfilter": attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12).close()),
  "netlink generic": attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 16).close()),
  "inet raw": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP).close()),
  "inet6 raw": attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_TCP).close()),
  "inet dgram": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()),
  "stream pair": attempt(lambda: pair(socket.SOCK_STREAM)),
  "seqpacket pair": attempt(lambda: pair(socket.SOCK_SEQPACKET)),
  "nonblocking stream pair": attempt(lambda: pair(socket.SOCK_STREAM | socket.SOCK_NONBLOCK)),
}))`
	r := runPython(t, &sb, script, host)
	var got map[string]string
	mustJSON(t, r, &got)
	want := map[string]string{
		"chmod host": "PermissionError", "chmod own": "PermissionError", "fchmod read-only": "PermissionError",
		"chown own": "PermissionError", "utime own": "PermissionError", "setxattr own": "PermissionError",
		"removexattr own": "PermissionError", "inotify": "PermissionError", "vsock": "PermissionError", "packet": "PermissionError",
		"unix dgram pair": "PermissionError", "netlink netfilter": "PermissionError", "netlink generic": "PermissionError",
		"inet raw": "PermissionError", "inet6 raw": "PermissionError",
		"inet": "ok", "inet6": "ok", "inet dgram": "ok", "netlink": "ok", "netlink usersock": "ok",
		"stream pair": "ok", "seqpacket pair": "ok", "nonblocking stream pair": "ok",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s, want %s", k, got[k], w)
		}
	}
	if st, err := os.Stat(host); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("host file: %v %v, want mode 0600", st.Mode(), err)
	}
}

// TestSeccompFilterLayout: every jump lands inside the program and it ends
// in returns only.
func TestSeccompFilterLayout(t *testing.T) {
	if _, ok := seccompArch[runtime.GOARCH]; !ok {
		t.Skipf("no seccomp filter for GOARCH %s", runtime.GOARCH)
	}
	f, err := seccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range f {
		if in.Code&0x07 == 0x05 && (i+1+int(in.Jt) >= len(f) || i+1+int(in.Jf) >= len(f)) {
			t.Errorf("instruction %d jumps out of the program: %+v", i, in)
		}
	}
	if last := f[len(f)-1]; last.Code&0x07 != 0x06 {
		t.Errorf("the filter does not end in a return: %+v", last)
	}
}
