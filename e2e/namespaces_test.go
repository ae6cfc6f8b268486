package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nsLimitVar in a daemon's env makes start launch it in a user namespace of
// its own whose every max_*_namespaces is the variable's value. The kernel
// checks the creation of a namespace against those limits at every ancestor
// user namespace, so a run that exhausts this small limit shows what it
// would do to the host's, which a test must never exhaust (other processes
// of the machine share it).
const nsLimitVar = "E2E_NS_LIMIT"

// launchUnderNamespaceLimit is the command that runs the daemon under
// nsLimitVar: this test binary in a new user namespace (root in it, mapped
// onto the test's ids), which lowers the limits and execs the daemon
// (execUnderNamespaceLimit).
func launchUnderNamespaceLimit(t *testing.T) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, daemonBin)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	return cmd
}

// execUnderNamespaceLimit runs first in TestMain when nsLimitVar is set:
// this binary is then launchUnderNamespaceLimit's, root of its own user
// namespace, which may set that namespace's limits. It execs the daemon
// (os.Args[1]) and does not return.
func execUnderNamespaceLimit(limit string) {
	fail := func(err error) {
		os.Stderr.WriteString("e2e: lowering the namespace limits: " + err.Error() + "\n")
		os.Exit(2)
	}
	entries, err := os.ReadDir("/proc/sys/user")
	if err != nil {
		fail(err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "max_") && strings.HasSuffix(n, "_namespaces") {
			if err := os.WriteFile("/proc/sys/user/"+n, []byte(limit), 0); err != nil {
				fail(err)
			}
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, nsLimitVar+"=") {
			env = append(env, kv)
		}
	}
	fail(syscall.Exec(os.Args[1], os.Args[1:], env))
}

// namespaceHog makes network namespaces (each kept by a descriptor) and user
// namespaces (each made by a child and kept by a descriptor of it) until
// refused or 64 of each, prints what it holds and why it stopped, and holds
// them until cancelled.
const namespaceHog = `import ctypes, errno, json, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
held, refusals, fds = {"net": 0, "user": 0}, set(), []
while held["net"] < 64:
    if libc.unshare(CLONE_NEWNET) != 0:
        refusals.add(errno.errorcode[ctypes.get_errno()])
        break
    fds.append(os.open("/proc/self/ns/net", os.O_RDONLY))
    held["net"] += 1
while held["user"] < 64:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, b"0" if libc.unshare(CLONE_NEWUSER) == 0 else errno.errorcode[ctypes.get_errno()].encode())
        time.sleep(60)
        os._exit(0)
    os.close(w)
    answer = os.read(r, 32).decode()
    os.close(r)
    if answer == "0":
        fds.append(os.open("/proc/%d/ns/user" % pid, os.O_RDONLY))
        held["user"] += 1
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    if answer != "0":
        refusals.add(answer)
        break
print(json.dumps({"held": held, "refusals": sorted(refusals)}), flush=True)
while True:
    time.sleep(1)`

// TestSandboxC681NamespaceHog: a run that makes namespaces until the
// kernel refuses cannot stop other runs, sessions or forks from starting.
// The daemon runs where each namespace type is limited to 8 (a user
// namespace of its own): the hog is refused its first namespace, and a
// second run, a session and a fork of it all start while it runs.
func TestSandboxC681NamespaceHog(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the daemon, root of the user namespace it runs in, needs the host's cgroups as root")
	}
	env := map[string]string{"CODERUN_ISOLATION": "sandbox", "CODERUN_WARM_POOL": "0", nsLimitVar: "8"}
	skipWithoutSandbox(t, env)
	d := started(t, env)
	hog := d.request("run", prog(namespaceHog, `"stream":true`, `"limits":{"maxWallMs":60000}`))
	note := d.waitEvent(func(m *msg) bool {
		return m.Method == "run/log" && strings.Contains(string(m.Params), "held")
	}, 30*time.Second)
	var line logNote
	var report struct {
		Held     map[string]int
		Refusals []string
	}
	if err := json.Unmarshal(note.Params, &line); err != nil || json.Unmarshal([]byte(line.Text), &report) != nil {
		t.Fatalf("the hog's report %s", note.Params)
	}
	t.Logf("the hog: %+v", report)
	if report.Held["net"] != 0 || report.Held["user"] != 0 || strings.Join(report.Refusals, ",") != "EPERM" {
		t.Errorf("the hog holds %v namespaces (refused with %v), want none (EPERM)", report.Held, report.Refusals)
	}
	expectOK(t, d.run(prog("return 1")), "1")
	sid := d.open("{}")
	if r := d.srun(sid, "return 2"); r.Error != nil || string(r.Value) != "2" {
		t.Errorf("a session beside the hog: %+v %s", r.Error, r.Value)
	}
	if r := d.srun(d.fork(sid), "return 3"); r.Error != nil || string(r.Value) != "3" {
		t.Errorf("a fork beside the hog: %+v %s", r.Error, r.Value)
	}
	d.notify("$/cancelRequest", `{"id":`+hog+`}`)
	expectFailure(t, d.result(d.wait(hog)), "abort", "run cancelled by the client")
}
