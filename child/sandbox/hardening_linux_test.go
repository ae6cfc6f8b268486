//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

// The findings of the containment review (issue 24), probed from a
// sandboxed program with ctypes as the review did. Each probe prints the
// errno name it met ("ok" when the call succeeded).

// errnoPrelude: attempt(f) is "ok" or the errno name of the OSError f
// raised; sys_call(nr, *args) is a raw system call that raises OSError.
const errnoPrelude = `import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def sys_call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
`

// TestSandboxHardeningSeccomp: keyrings, fanotify, attribute flags,
// file_setattr, memory that is no address space and execveat are refused;
// other ioctls and fexecve of the interpreter still work; a host file the
// program can read keeps its flags.
func TestSandboxHardeningSeccomp(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	host := hostFile(t, 0o644)
	sb.ReadOnly = append(sb.ReadOnly, host)
	flagsBefore, flagsErr := fileFlags(host)
	// Syscall numbers of amd64 and arm64 (the CI machines); the ioctl
	// requests are the generic _IOW encoding.
	nr := map[string][2]int{"keyctl": {250, 219}, "add_key": {248, 217}, "request_key": {249, 218},
		"fanotify_init": {300, 262}, "fanotify_mark": {301, 263}, "memfd_create": {319, 279},
		"shmget": {29, 194}, "execveat": {322, 281}}
	script := errnoPrelude + `import fcntl, subprocess, termios
TCGETS = 0x5401
nr, host = json.loads(sys.argv[1]), sys.argv[2]
arch = 0 if os.uname().machine == "x86_64" else 1
def call(name, *args):
    return lambda: sys_call(nr[name][arch], *args)
KEY_SPEC_SESSION, KEY_SPEC_USER, KEYCTL_GET_ID, KEYCTL_LINK = -3, -4, 0, 8
FS_IOC_SETFLAGS, FS_IOC_SETVERSION, FS_IOC_FSSETXATTR = 0x40086602, 0x40087602, 0x401c5820
ro = os.open(host, os.O_RDONLY)
open("own", "w").close()
own = os.open("own", os.O_RDONLY)
flags = ctypes.c_long(0x40)  # FS_NODUMP_FL
def ioctl(fd, req, arg=ctypes.byref(flags)):
    if libc.ioctl(fd, ctypes.c_ulong(req), arg) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
r, w = os.pipe()
os.write(w, b"abc")
fexecve = """import os, sys
fd = os.open(sys.executable, os.O_RDONLY)
os.execve(fd, [sys.executable, "-c", "print('fexecve')"], {})"""
print(json.dumps({
  "keyctl link user keyring": attempt(call("keyctl", KEYCTL_LINK, KEY_SPEC_USER, KEY_SPEC_SESSION)),
  "keyctl get user keyring": attempt(call("keyctl", KEYCTL_GET_ID, KEY_SPEC_USER, 0)),
  "add_key": attempt(call("add_key", b"user", b"coderun-planted", b"x", 1, KEY_SPEC_USER)),
  "request_key": attempt(call("request_key", b"user", b"coderun-planted", None, 0)),
  "fanotify_init": attempt(call("fanotify_init", 0, 0)),
  "fanotify_mark": attempt(call("fanotify_mark", 0, 1, 0x20, -100, b"/")),
  "setflags read-only": attempt(lambda: ioctl(ro, FS_IOC_SETFLAGS)),
  "setflags own": attempt(lambda: ioctl(own, FS_IOC_SETFLAGS)),
  "setversion read-only": attempt(lambda: ioctl(ro, FS_IOC_SETVERSION)),
  "fssetxattr read-only": attempt(lambda: ioctl(ro, FS_IOC_FSSETXATTR)),
  "setflags high bits": attempt(lambda: ioctl(ro, FS_IOC_SETFLAGS | (1 << 32))),
  "file_setattr": attempt(lambda: sys_call(469, -100, host.encode(), None, 0, 0)),
  "memfd_create": attempt(lambda: os.memfd_create("x")),
  "memfd_secret": attempt(lambda: sys_call(447, 0)),
  "shmget": attempt(call("shmget", 0, 1 << 20, 0o1600)),
  "execveat": attempt(call("execveat", ro, b"", None, None, 0x1000)),
  "TCGETS": attempt(lambda: ioctl(r, TCGETS, ctypes.create_string_buffer(256))),
  "FIONREAD": attempt(lambda: fcntl.ioctl(r, termios.FIONREAD, b"\0\0\0\0")),
  "fexecve interpreter": subprocess.run([sys.executable, "-c", fexecve], capture_output=True).stdout.decode().strip(),
}))`
	r := runPython(t, &sb, script, mustMarshal(t, nr), host)
	var got map[string]string
	mustJSON(t, r, &got)
	want := map[string]string{
		"keyctl link user keyring": "ENOSYS", "keyctl get user keyring": "ENOSYS",
		"add_key": "ENOSYS", "request_key": "ENOSYS",
		"fanotify_init": "EPERM", "fanotify_mark": "EPERM",
		"setflags read-only": "EPERM", "setflags own": "EPERM", "setversion read-only": "EPERM",
		"fssetxattr read-only": "EPERM", "setflags high bits": "EPERM", "file_setattr": "EPERM",
		"memfd_create": "ENOSYS", "memfd_secret": "ENOSYS", "shmget": "ENOSYS", "execveat": "ENOSYS",
		"TCGETS": "ENOTTY", "FIONREAD": "ok", "fexecve interpreter": "fexecve",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s, want %s", k, got[k], w)
		}
	}
	if flagsErr == nil {
		if after, err := fileFlags(host); err != nil || after != flagsBefore {
			t.Errorf("host file flags %#x (%v), were %#x", after, err, flagsBefore)
		}
	}
}

// fileFlags reads a file's attribute flags (FS_IOC_GETFLAGS).
func fileFlags(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
}

// TestSandboxHardeningC682Proc: /proc files that describe the host
// read empty — the named ones, every top-level file that is not
// world-readable (a root daemon's program, root of its namespace, would
// read them: the host's physical pages and each page's memory cgroup, the
// kernel's slabs and allocations), the host-wide counts of open files,
// inodes, dentries and AIO contexts (which follow other runs' activity) —
// and the root-only directory /proc/tty/driver lists nothing. The run's
// cgroup, which /proc/self/cgroup shows, is named at random.
func TestSandboxHardeningC682Proc(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	files := []string{"keys", "key-users", "timer_list", "config.gz", "sched_debug",
		"sys/fs/file-nr", "sys/fs/inode-nr", "sys/fs/inode-state", "sys/fs/dentry-state", "sys/fs/aio-nr"}
	top, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o004 == 0 {
			files = append(files, e.Name())
		}
	}
	t.Logf("probed: %v", files)
	script := errnoPrelude + `out = {}
for p in json.loads(sys.argv[1]):
    try:
        fd = os.open("/proc/" + p, os.O_RDONLY | os.O_NONBLOCK)
        try:
            out[p] = len(os.read(fd, 4096))
        finally:
            os.close(fd)
    except FileNotFoundError:
        out[p] = 0
    except OSError as e:
        out[p] = e.__class__.__name__
try:
    out["tty/driver"] = os.listdir("/proc/tty/driver")
except FileNotFoundError:
    out["tty/driver"] = []
except OSError as e:
    out["tty/driver"] = e.__class__.__name__
out["cgroup"] = [l for l in open("/proc/self/cgroup").read().splitlines() if ":pids:" in l or l.startswith("0::")]
# A detached copy of /proc (open_tree's OPEN_TREE_CLONE, without the masks,
# which are submounts) and a new procfs (fsopen): the mount API is refused.
AT_FDCWD, OPEN_TREE_CLONE, SYS_OPEN_TREE, SYS_FSOPEN = -100, 1, 428, 430
def read_through_clone():
    tree = sys_call(SYS_OPEN_TREE, AT_FDCWD, b"/proc", OPEN_TREE_CLONE)
    fd = os.open("kpagecgroup", os.O_RDONLY, dir_fd=tree)
    if os.read(fd, 4096):
        raise OSError(0, "read the host's kpagecgroup")
out["open_tree clone"] = attempt(read_through_clone)
out["fsopen"] = attempt(lambda: sys_call(SYS_FSOPEN, b"proc", 0))
# What reads the host-wide counters that stay readable still works.
import multiprocessing
with multiprocessing.Pool(2) as pool:
    out["libraries"] = [os.cpu_count() == len(os.sched_getaffinity(0)), len(os.getloadavg()), pool.map(abs, [-1, -2])]
print(json.dumps(out))`
	r := runPython(t, &sb, script, mustMarshal(t, files))
	var got map[string]any
	mustJSON(t, r, &got)
	for _, p := range files {
		if got[p] != 0.0 {
			t.Errorf("/proc/%s: read %v, want nothing", p, got[p])
		}
	}
	for _, k := range []string{"open_tree clone", "fsopen"} {
		if got[k] != "EPERM" {
			t.Errorf("%s: %v, want EPERM", k, got[k])
		}
	}
	if fmt.Sprint(got["libraries"]) != "[true 3 [1 2]]" {
		t.Errorf("os.cpu_count == affinity, os.getloadavg, multiprocessing.Pool: %v, want [true 3 [1 2]]", got["libraries"])
	}
	if d, ok := got["tty/driver"].([]any); !ok || len(d) != 0 {
		t.Errorf("/proc/tty/driver lists %v, want nothing", got["tty/driver"])
	}
	cg, _ := got["cgroup"].([]any)
	t.Logf("cgroups seen by the program: %v", cg)
	for _, l := range cg {
		if regexp.MustCompile(`coderun-[0-9]+-[0-9]+`).MatchString(l.(string)) {
			t.Errorf("cgroup %q carries the daemon's pid", l)
		}
	}
	if base, err := pidsCgroupBase(); err == nil && os.Geteuid() == 0 {
		want := regexp.MustCompile(`/coderun-[0-9a-f]{16}$`)
		found := false
		for _, l := range cg {
			found = found || want.MatchString(l.(string))
		}
		if !found {
			t.Errorf("cgroups %v: none is a random run cgroup under %s", cg, base)
		}
	}
}

// TestSandboxHardeningShm: the private /dev/shm holds at most
// MaxFileBytes in all, however many files share it.
func TestSandboxHardeningShm(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	sb.MaxFileBytes = 1 << 20
	const script = `import errno, json
written = 0
err = ""
try:
    for i in range(8):
        with open("/dev/shm/f%d" % i, "wb") as f:
            for _ in range(3):
                f.write(b"x" * (256 << 10))
                f.flush()
                written += 256 << 10
except OSError as e:
    err = errno.errorcode[e.errno]
print(json.dumps({"written": written, "err": err}))`
	r := runPython(t, &sb, script)
	var got struct {
		Written int64
		Err     string
	}
	mustJSON(t, r, &got)
	if got.Err != "ENOSPC" || got.Written > sb.MaxFileBytes {
		t.Errorf("wrote %d bytes into /dev/shm (then %q), want at most %d and ENOSPC", got.Written, got.Err, sb.MaxFileBytes)
	}
}

// burnScript sets RLIMIT_CPU as the child does at boot (soft argv[1], hard
// one more), then starts argv[2] processes that each burn argv[3] seconds
// of CPU (or forever: 0) and exits 0 once they have. With argv[4] ==
// "orphans" the burners are orphaned (double fork): the program never
// reaps them, the init does.
const burnScript = `import os, resource, sys, time
soft, n, each, mode = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
r, w = os.pipe()
def burn():
    end = time.process_time() + each
    while each == 0 or time.process_time() < end:
        pass
    os.write(w, b"x")
    os._exit(0)
kids = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        if mode == "orphans" and os.fork() != 0:
            os._exit(0)
        burn()
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
os.close(w)
done = 0
while done < n and os.read(r, 1):
    done += 1
`

// TestSandboxHardeningRunCPU: the CPU budget bounds the run as a whole.
// Four burners under a 2 s budget, each of which RLIMIT_CPU alone would
// let run to 2 s, are all SIGKILLed once the run has used 2 s; the relayed
// CPU is the run's, so the daemon's rule "SIGKILL with CPU ≥ the soft
// limit" makes it timeout/cpu. Below the budget nothing is killed, and the
// relayed CPU includes orphans the program never reaped.
func TestSandboxHardeningRunCPU(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	t.Run("over the budget", func(t *testing.T) {
		start := time.Now()
		r := runPython(t, &sb, burnScript, "2", "4", "0", "reap")
		wall := time.Since(start)
		t.Logf("exit %+v after %v", r.exit, wall)
		if !r.exit.Signaled || r.exit.Signal != "SIGKILL" {
			t.Fatalf("exit %+v (stderr %q), want SIGKILL", r.exit, r.stderr)
		}
		if r.exit.CPU < 2*time.Second {
			t.Errorf("relayed CPU %v, want at least the 2s budget (timeout/cpu)", r.exit.CPU)
		}
		// Per process, RLIMIT_CPU would have allowed 4 × 2 s; a tenth of
		// a second of sampling on each CPU is the expected overshoot.
		if r.exit.CPU > 3*time.Second {
			t.Errorf("relayed CPU %v: the run was not stopped near its 2s budget", r.exit.CPU)
		}
	})
	t.Run("under the budget, orphans counted", func(t *testing.T) {
		r := runPython(t, &sb, burnScript, "5", "3", "0.4", "orphans")
		if r.exit.Code != 0 || r.exit.Signaled {
			t.Fatalf("exit %+v (stderr %q), want 0", r.exit, r.stderr)
		}
		if r.exit.CPU < 1100*time.Millisecond || r.exit.CPU > 5*time.Second {
			t.Errorf("relayed CPU %v, want the run's (3 orphans × 0.4 s and the program)", r.exit.CPU)
		}
	})
}

func TestStatCPUTicks(t *testing.T) {
	line := "42 (a) b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 20 10 20 0 1 0 100 0 0"
	if got := statCPUTicks([]byte(line)); got != 40 {
		t.Errorf("statCPUTicks = %d, want 7+3+20+10", got)
	}
	for _, bad := range []string{"", "42 (a) S 1", "42 (a) S 1 42 42 0 -1 0 0 0 0 0 x 3 20 10"} {
		if got := statCPUTicks([]byte(bad)); got != 0 {
			t.Errorf("statCPUTicks(%q) = %d, want 0", bad, got)
		}
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSandboxHardeningMemoryCgroup (root daemon with a memory cgroup): the
// run's memory, /dev/shm included, is bounded by its address-space budget,
// which the init reads from the program's RLIMIT_AS. Files in /dev/shm are
// no address space: without the cgroup the program would hold all it
// writes there (up to the tmpfs size); with it the kernel kills the run
// near the budget.
func TestSandboxHardeningMemoryCgroup(t *testing.T) {
	if _, err := memoryCgroupBase(); err != nil || os.Geteuid() != 0 {
		t.Skipf("no memory cgroup (euid %d): %v", os.Geteuid(), err)
	}
	leakcheck.Check(t)
	sb := testSandbox(t)
	sb.MaxFileBytes = 1 << 30
	const budget = 192 << 20
	script := `import resource, sys, time
budget = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (budget, budget))
time.sleep(0.5)  # the init polls every 100 ms
block = b"x" * (1 << 20)
with open("/dev/shm/fill", "wb") as f:
    for mib in range(1, 513):
        f.write(block)
        f.flush()
        print(mib, flush=True)
`
	r := runPython(t, &sb, script, strconv.Itoa(budget))
	lines := strings.Fields(r.stdout)
	last := 0
	if len(lines) > 0 {
		last, _ = strconv.Atoi(lines[len(lines)-1])
	}
	t.Logf("exit %+v after %d MiB in /dev/shm", r.exit, last)
	if !r.exit.Signaled || r.exit.Signal != "SIGKILL" {
		t.Errorf("exit %+v (stderr %q), want the memory cgroup's SIGKILL", r.exit, r.stderr)
	}
	if last<<20 > budget {
		t.Errorf("the run held %d MiB in /dev/shm under a %d MiB budget", last, budget>>20)
	}
}

// namespacesProbe tries, from a sandboxed program, every way to make a
// namespace: unshare and clone with each CLONE_NEW* flag (clone has no
// time-namespace flag), clone3, and setns into its own network namespace.
// Each attempt runs in a child of its own, so one that succeeds changes
// nothing for the next; a clone that succeeds ends its new process at once.
// It also reads the run's namespace limits and checks that forks, threads
// and subprocesses, which clone without namespace flags, still work.
const namespacesProbe = errnoPrelude + `import ctypes, subprocess, threading
NS = {"user": 0x10000000, "pid": 0x20000000, "net": 0x40000000, "mnt": 0x00020000, "ipc": 0x08000000,
      "uts": 0x04000000, "cgroup": 0x02000000, "time": 0x00000080}
SYS_CLONE = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
SYS_CLONE3, SIGCHLD, CLONE_FILES = 435, 17, 0x400
def in_child(f):
    """f's outcome in a forked child: "ok" or the errno name."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            f()
        except OSError as e:
            code = e.errno
        os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return "ok" if code == 0 else errno.errorcode.get(code, str(code))
def made(pid):
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
def unshare(flags):
    if libc.unshare(flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
class CloneArgs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("flags", "pidfd", "child_tid", "parent_tid", "exit_signal",
                                               "stack", "stack_size", "tls", "set_tid", "set_tid_size", "cgroup")]
def clone3(flags):
    args = CloneArgs(flags=flags, exit_signal=SIGCHLD)
    made(sys_call(SYS_CLONE3, ctypes.byref(args), ctypes.sizeof(args)))
def setns():
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    if libc.setns(fd, NS["net"]) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
out = {}
for name, flag in NS.items():
    out["unshare " + name] = in_child(lambda: unshare(flag))
    if name != "time":
        out["clone " + name] = in_child(lambda: made(sys_call(SYS_CLONE, flag | SIGCHLD, 0, 0, 0, 0)))
out["clone3 user"] = in_child(lambda: clone3(NS["user"]))
out["setns net"] = in_child(setns)
out["unshare files"] = in_child(lambda: unshare(CLONE_FILES))
def raise_limit():
    with open("/proc/sys/user/max_user_namespaces", "w") as f:
        f.write("100")
out["raise limit"] = attempt(raise_limit)
limits = {}
for f in sorted(os.listdir("/proc/sys/user")):
    if f.startswith("max_") and f.endswith("_namespaces"):
        limits[f] = open("/proc/sys/user/" + f).read().strip()
out["limits"] = limits
t = threading.Thread(target=lambda: None)
t.start()
t.join()
out["thread"] = "ok"
out["subprocess"] = subprocess.run([sys.executable, "-c", "pass"]).returncode
print(json.dumps(out))
`

// checkNamespacesProbe checks namespacesProbe's report: every namespace
// refused (EPERM; clone3, whose flags seccomp cannot read, ENOSYS), every
// namespace limit of the run's user namespace 0, forks, threads and
// subprocesses unharmed.
func checkNamespacesProbe(t *testing.T, r runResult) {
	t.Helper()
	var got map[string]any
	mustJSON(t, r, &got)
	for _, ns := range []string{"user", "pid", "net", "mnt", "ipc", "uts", "cgroup", "time"} {
		want := map[string]any{"unshare " + ns: "EPERM"}
		if ns != "time" {
			want["clone "+ns] = "EPERM"
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %v, want %v", k, got[k], w)
			}
		}
	}
	for k, w := range map[string]any{"clone3 user": "ENOSYS", "setns net": "EPERM", "unshare files": "ok", "raise limit": "EACCES",
		"thread": "ok", "subprocess": 0.0} {
		if got[k] != w {
			t.Errorf("%s: %v, want %v", k, got[k], w)
		}
	}
	limits, _ := got["limits"].(map[string]any)
	if len(limits) < 7 {
		t.Errorf("namespace limits seen: %v, want every max_*_namespaces", limits)
	}
	for k, v := range limits {
		if v != "0" {
			t.Errorf("/proc/sys/user/%s in the run: %v, want 0", k, v)
		}
	}
}

// TestSandboxHardeningC680Namespaces: a program can make no namespace
// of any type, spawned or forked from the sandboxed fork server: one run
// could otherwise take every namespace its daemon's user may have on the
// host (user namespaces are counted per user at every ancestor level), and
// hold kernel memory its memory cgroup does not see.
func TestSandboxHardeningC680Namespaces(t *testing.T) {
	leakcheck.Check(t)
	spawnedAndForked(t, namespacesProbe, checkNamespacesProbe)
}

// spawnedAndForked runs script in a spawned sandboxed run and in one forked
// from the sandboxed fork server, and checks each result.
func spawnedAndForked(t *testing.T, script string, check func(*testing.T, runResult)) {
	t.Helper()
	sb := testSandbox(t)
	t.Run("spawned", func(t *testing.T) { check(t, runPython(t, &sb, script)) })
	t.Run("forked", func(t *testing.T) {
		srv := startSandboxForkServer(t, "")
		check(t, finishForked(t, forkPython(t, srv, &sb, script)))
	})
}

// TestSandboxHardeningC683QueuedKernelObjects: queued signals, which the
// kernel counts per user at every ancestor user namespace up to the daemon
// user's host-wide count, are bounded per run (sandboxSigPending), spawned
// and forked; POSIX message queues, counted the same way, cannot be made
// (Landlock refuses to create the queue's file).
func TestSandboxHardeningC683QueuedKernelObjects(t *testing.T) {
	leakcheck.Check(t)
	script := errnoPrelude + `import signal
def mq_open():
    libc.mq_open.restype = ctypes.c_int
    fd = libc.mq_open(b"/coderun-probe", os.O_CREAT | os.O_RDWR, 0o600, None)
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    libc.mq_unlink(b"/coderun-probe")
out = {"mq_open": attempt(mq_open)}
sig = signal.SIGRTMIN
signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
queued, stop = 0, "none"
while queued < 2000:
    if libc.sigqueue(os.getpid(), sig, ctypes.c_void_p(0)) != 0:
        stop = errno.errorcode[ctypes.get_errno()]
        break
    queued += 1
out["queued"], out["stop"] = queued, stop
print(json.dumps(out))`
	check := func(t *testing.T, r runResult) {
		var got struct {
			MqOpen string `json:"mq_open"`
			Queued int
			Stop   string
		}
		mustJSON(t, r, &got)
		if got.MqOpen != "EACCES" {
			t.Errorf("mq_open: %s, want EACCES", got.MqOpen)
		}
		if got.Queued > sandboxSigPending || got.Stop != "EAGAIN" {
			t.Errorf("%d signals queued (then %s), want at most %d, then EAGAIN", got.Queued, got.Stop, sandboxSigPending)
		}
	}
	spawnedAndForked(t, script, check)
}

// TestSandboxHardeningC685Ptrace: a program cannot trace or reach into
// another of its processes (ptrace, process_vm_readv, pidfd_getfd), spawned
// and forked: a tracer that never waits would keep a killed session's
// interpreter unreaped (session/close never returned), and would cancel the
// idle freeze's stops.
func TestSandboxHardeningC685Ptrace(t *testing.T) {
	leakcheck.Check(t)
	script := errnoPrelude + `import signal, time
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
PTRACE_ATTACH, PTRACE_TRACEME = 16, 0
out = {
    "attach": attempt(lambda: sys_call(` + fmt.Sprint(unix.SYS_PTRACE) + `, PTRACE_ATTACH, child, 0, 0)),
    "traceme": attempt(lambda: sys_call(` + fmt.Sprint(unix.SYS_PTRACE) + `, PTRACE_TRACEME, 0, 0, 0)),
    "vm_readv": attempt(lambda: sys_call(` + fmt.Sprint(unix.SYS_PROCESS_VM_READV) + `, child, 0, 0, 0, 0, 0)),
    "pidfd_getfd": attempt(lambda: sys_call(` + fmt.Sprint(unix.SYS_PIDFD_GETFD) + `, 0, 0, 0)),
}
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
print(json.dumps(out))`
	check := func(t *testing.T, r runResult) {
		var got map[string]string
		mustJSON(t, r, &got)
		for _, k := range []string{"attach", "traceme", "vm_readv", "pidfd_getfd"} {
			if got[k] != "EPERM" {
				t.Errorf("%s: %s, want EPERM", k, got[k])
			}
		}
	}
	spawnedAndForked(t, script, check)
}
