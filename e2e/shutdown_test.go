package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// C124: shutdown answers only after the child (which traps SIGTERM) is dead.
func TestShutdownWaitsForChild(t *testing.T) {
	onlyInTier(t, "process") // the program reports its own pid, which tier sandbox namespaces
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_GRACE_MS": "400"})
	pids := make(chan int, 1)
	d.behave("ready", func(p callParams) string {
		var a struct{ Pid int }
		json.Unmarshal(p.Args, &a)
		pids <- a.Pid
		return `"result":null`
	})
	id := d.request("run", prog(`import os, signal, time
signal.signal(signal.SIGTERM, lambda *a: None)
await tools.ready({"pid": os.getpid()})
while True:
    time.sleep(0.05)`, `"bindings":[{"global":"tools","functions":["ready"]}]`, `"limits":{"maxWallMs":10000}`))
	pid := <-pids
	time.Sleep(100 * time.Millisecond) // the answer reaches the child
	start := time.Now()
	m := d.call("shutdown", "")
	elapsed := time.Since(start)
	alive := syscall.Kill(pid, 0) != syscall.ESRCH
	if m.Error != nil || string(m.Result) != "null" || elapsed < 300*time.Millisecond || alive {
		t.Errorf("shutdown %s after %v; pid %d alive %v", m.raw, elapsed, pid, alive)
	}
	expectFailure(t, d.result(d.wait(id)), "abort", "server is shutting down")
}

// C128: shutdown waits for a same-group survivor of a finished run.
func TestShutdownWaitsForSurvivor(t *testing.T) {
	onlyInTier(t, "process") // the survivor beats in a file outside the run directory, which tier sandbox does not let it write
	t.Parallel()
	hb := filepath.Join(t.TempDir(), "HB")
	d := started(t, map[string]string{"CODERUN_GRACE_MS": "300"})
	r := d.run(prog(fmt.Sprintf(`import os, subprocess, sys, time
hb = %q
code = ("import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "hb = sys.argv[1]\n"
        "end = time.time() + 30\n"
        "while time.time() < end:\n"
        "    with open(hb, 'a'):\n"
        "        os.utime(hb)\n"
        "    time.sleep(0.05)\n")
subprocess.Popen([sys.executable, "-c", code, hb], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not os.path.exists(hb):
    time.sleep(0.01)
return "spawned"`, hb), `"limits":{"maxWallMs":10000}`))
	expectOK(t, r, `"spawned"`)
	if m := d.call("shutdown", ""); m.Error != nil {
		t.Fatalf("shutdown: %s", m.raw)
	}
	before, err := os.Stat(hb)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	after, _ := os.Stat(hb)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the survivor still beats after shutdown answered")
	}
}

// docs/child-protocol-daemon.md §4.10: exit right behind shutdown waits for the teardown; the shutdown
// response is still sent, then the process exits 0.
func TestExitWaitsForShutdown(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_GRACE_MS": "300"})
	d.behave("ready", constant("null"))
	id := d.request("run", prog("import signal, time\nsignal.signal(signal.SIGTERM, lambda *a: None)\nawait tools.ready()\nwhile True:\n    time.sleep(0.05)",
		`"bindings":[{"global":"tools","functions":["ready"]}]`))
	d.waitEvent(func(m *msg) bool { return m.Method == "binding/call" }, 30*time.Second)
	time.Sleep(100 * time.Millisecond)
	d.writeRaw(append(frame(d.requestBody("900", "shutdown", "")), frame(`{"jsonrpc":"2.0","method":"exit"}`)...))
	if code := d.waitExit(20 * time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
	expectFailure(t, d.result(d.wait(id)), "abort", "server is shutting down")
	if m := d.wait("900"); m.Error != nil || string(m.Result) != "null" {
		t.Errorf("shutdown response %s", m.raw)
	}
}
