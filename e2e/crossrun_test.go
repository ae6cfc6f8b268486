package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
func hostProcessesWith(marker string, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		var found []string
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), marker) {
				found = append(found, e.Name())
			}
		}
		if len(found) == 0 || time.Now().After(deadline) {
			return found
		}
		time.Sleep(50 * time.Millisecond)
	}
}
