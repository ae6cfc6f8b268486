package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// No state crosses from one sandboxed run to the next, forked from the
// sandboxed fork server (the default start mode) or spawned: run A leaves a
// file in /tmp and in its run directory, a POSIX semaphore, a SysV message
// queue, an abstract unix socket, a background process in a session of its
// own, an environment variable, and a module changed in sys.modules; run B,
// on the same daemon, sees none of it, and no process of run A outlives it
// on the host.
func TestSandboxCrossRunState(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"fork", "spawn"} {
		t.Run(mode, func(t *testing.T) {
			d := started(t, map[string]string{"CODERUN_ISOLATION": "sandbox", "CODERUN_START_MODE": mode,
				"CODERUN_MAX_CONCURRENT_RUNS": "1", "CODERUN_WARM_POOL": "1"})
			marker := "crossrun-" + mode + "-" + strconvItoa(os.Getpid())
			a := d.run(prog(strings.ReplaceAll(crossRunLeave, "MARKER", marker)))
			if a.Error != nil {
				t.Fatalf("run A: %+v (logs %q)", *a.Error, a.Logs)
			}
			if left := hostProcessesWith(marker, 5*time.Second); len(left) > 0 {
				t.Errorf("run A's background process outlived it: %v", left)
			}
			b := d.run(prog("a = " + string(a.Value) + "\n" + strings.ReplaceAll(crossRunLook, "MARKER", marker)))
			expectOK(t, b, `[false,false,[],false,false,false,"[1]",false,2]`)
			if _, err := os.Stat(filepath.Join(os.TempDir(), marker)); err == nil {
				t.Errorf("run A wrote the host's %s", os.TempDir())
			}
		})
	}
}

// crossRunLeave is run A: it leaves what it can and returns where.
const crossRunLeave = `import ctypes, json, os, socket, subprocess, sys
from _multiprocessing import SemLock
out = {"dir": os.getcwd()}
with open("left.txt", "w") as f:
    f.write("A")
try:
    with open("/tmp/MARKER", "w") as f:
        f.write("A")
except OSError:
    pass
sem = SemLock(1, 1, 1, "/MARKER", False)
libc = ctypes.CDLL(None, use_errno=True)
out["mq"] = libc.msgget(0x5eed, 0o1600)
pair = socket.socketpair()
pair[0].bind("\0MARKER")
os.environ["MARKER"] = "A"
json.dumps = lambda *a, **k: "changed"
sys.modules["MARKER"] = json
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "MARKER"], start_new_session=True,
                 pass_fds=[pair[0].fileno()])
return out`

// crossRunLook is run B: what it can see of run A (its directory's file,
// /tmp, /dev/shm, the message queue, the variable, the module, json.dumps,
// the socket) and how many processes (its init and itself).
const crossRunLook = `import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
with open("/proc/net/unix") as f:
    sockets = f.read()
return [os.path.exists(a["dir"] + "/left.txt"), os.path.exists("/tmp/MARKER"), os.listdir("/dev/shm"),
        libc.msgget(0x5eed, 0) >= 0, "MARKER" in os.environ, "MARKER" in sys.modules, json.dumps([1]),
        "MARKER" in sockets, len([p for p in os.listdir("/proc") if p.isdigit()])]`

// hostProcessesWith polls the host's /proc until no process's command line
// holds marker, or until wait has passed; it returns the pids still found.
func hostProcessesWith(marker string, wait time.Duration) []int {
	deadline := time.Now().Add(wait)
	for {
		found := leakcheck.ProcessesWith(marker)
		if len(found) == 0 || time.Now().After(deadline) {
			return found
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Concurrent sandboxed runs share no channel through netlink: the seccomp
// filter allows AF_NETLINK sockets, which a network namespace confines, and
// in one namespace two processes without any capability can exchange
// messages through NETLINK_USERSOCK by port id. Run A binds a port, says so
// (a binding call), and waits for a message; only then is run B sent, which
// sends one message to that port while A waits. In tier sandbox each run has
// a network namespace of its own: B's send is refused, so nothing can reach
// A, which is then cancelled. Tier process shares the host's namespace and
// promises nothing here; there the message gets through, which shows that
// the two runs overlap and the channel is real.
func TestSandboxConcurrentRunsNetlink(t *testing.T) {
	t.Parallel()
	for _, tier := range []string{"sandbox", "process"} {
		t.Run(tier, func(t *testing.T) {
			t.Parallel()
			d := started(t, map[string]string{"CODERUN_ISOLATION": tier, "CODERUN_MAX_CONCURRENT_RUNS": "2"})
			// A port id of this test process's own: other tests' runs in
			// tier process share the host's namespace.
			port := strconvItoa(0x40000000 + os.Getpid())
			listen := d.request("run", prog(strings.ReplaceAll(netlinkListen, "PORT", port),
				`"bindings":[{"global":"host","functions":["bound"]}]`))
			d.waitEvent(func(m *msg) bool {
				return m.Method == "binding/call" && strings.Contains(string(m.Params), `"bound"`)
			}, 30*time.Second)
			sent := d.run(prog(strings.ReplaceAll(netlinkSend, "PORT", port)))
			if tier == "process" {
				expectOK(t, sent, `"sent"`)
				expectOK(t, d.result(d.wait(listen)), `"hello"`)
				return
			}
			expectOK(t, sent, `"ECONNREFUSED"`)
			d.notify("$/cancelRequest", `{"id":`+listen+`}`)
			expectFailure(t, d.result(d.wait(listen)), "abort", "run cancelled by the client")
		})
	}
}

// netlinkListen binds a NETLINK_USERSOCK port, tells the host, and returns
// the first message's payload.
const netlinkListen = `import socket
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)
s.bind((PORT, 0))
await host.bound()
return s.recv(100)[16:].decode()`

// netlinkSend sends one message to the port and returns "sent" or the
// error's name.
const netlinkSend = `import errno, socket
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)
s.bind((0, 0))
try:
    s.sendto((21).to_bytes(4, "little") + (0x10).to_bytes(2, "little") + bytes(10) + b"hello", (PORT, 0))
    return "sent"
except OSError as e:
    return errno.errorcode[e.errno]`
