//go:build linux

package child_test

import (
	"bytes"
	"errors"
	"os"
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

func TestStartTime(t *testing.T) {
	leakcheck.Check(t)
	a, ok1 := child.StartTime(os.Getpid())
	b, ok2 := child.StartTime(os.Getpid())
	if !ok1 || !ok2 || a != b || a == 0 {
		t.Errorf("own start time %d %v, %d %v", a, ok1, b, ok2)
	}
	if _, ok := child.StartTime(0); ok {
		t.Error("start time for pid 0")
	}
	if _, ok := child.StartTime(-1); ok {
		t.Error("start time for pid -1")
	}
	max, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pidMax, _ := strconv.Atoi(strings.TrimSpace(string(max)))
	if _, ok := child.StartTime(pidMax); ok { // pids are < pid_max
		t.Error("start time for a pid that cannot exist")
	}
}

// TestEffectiveSoftCPUInherited changes RLIMIT_CPU in a subprocess (hard
// limits can only be lowered); the last limit is inherited across an exec
// by the process that computes the clamp.
func TestEffectiveSoftCPUInherited(t *testing.T) {
	leakcheck.Check(t)
	cases := []struct{ limits, want string }{
		{"inf,inf,42,1", "42 1"},          // no inherited limit: (req, req+1)
		{"5,inf,30,3", "5 3"},             // ulimit -S -t 5
		{"100,100,30,99,100", "30 99 99"}, // soft' == hard' → hard' − 1
		{"2,2,30,1", "1 1"},               // ulimit -t 2 → (1, 2)
	}
	var args []string
	var want string
	for _, c := range cases {
		args = append(args, c.limits)
		want += c.want + "\n"
	}
	out, err := childtest.HelperCommand(t, "cpu-set", args...).Output()
	if err != nil || string(out) != want {
		t.Errorf("cpu-set %q: %q, %v; want %q", args, out, err, want)
	}
}

func TestEffectiveSoftCPUReadAtCallTime(t *testing.T) {
	leakcheck.Check(t)
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_CPU, &rl)
	if rl.Cur != unix.RLIM_INFINITY && rl.Cur < 30 {
		t.Skipf("test process already runs under RLIMIT_CPU %d", rl.Cur)
	}
	out, err := childtest.HelperCommand(t, "cpu-live").Output()
	if err != nil || string(out) != "30\n5\n" {
		t.Errorf("cpu-live: %q, %v; want 30 then 5", out, err)
	}
}

func TestProbe(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv("PROBE_VAR", "from the caller")
	t.Setenv(leakcheck.TagVar, strings.TrimPrefix(leakcheck.Tag(), leakcheck.TagVar+"="))
	wd, _ := os.Getwd()

	out, err := child.Probe("/bin/sh", []string{"-c", `echo "$PROBE_VAR"; pwd; echo ignored >&2`}, 5*time.Second, 1024)
	if err != nil || string(out) != "from the caller\n"+wd+"\n" {
		t.Errorf("env/cwd probe: %q, %v", out, err)
	}

	out, err = child.Probe("/bin/sh", []string{"-c", `head -c 100000 /dev/zero | tr '\0' x`}, 5*time.Second, 1024)
	if err != nil || len(out) != 1024 {
		t.Errorf("maxOut probe: %d bytes, %v; want 1024", len(out), err)
	}

	_, err = child.Probe("/bin/sh", []string{"-c", "echo oops >&2; exit 7"}, 5*time.Second, 1024)
	if err == nil || !strings.Contains(err.Error(), "exit status 7") || !strings.Contains(err.Error(), "oops") {
		t.Errorf("exit 7 probe: %v", err)
	}

	_, err = child.Probe("/bin/sh", []string{"-c", "kill -SEGV $$"}, 5*time.Second, 1024)
	if err == nil || !strings.Contains(err.Error(), "killed by signal SIGSEGV") {
		t.Errorf("signal probe: %v", err)
	}

	_, err = child.Probe("/definitely/not/there", nil, 5*time.Second, 1024)
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing probe: %v", err)
	}
}

// TestProbeDeadline is C223: a probe that traps SIGTERM and sleeps (with a
// same-group grandchild) is SIGKILLed at the deadline, and child.Probe returns
// promptly with what it printed.
func TestProbeDeadline(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv(childtest.HelperVar, "probe-trap")
	t.Setenv(leakcheck.TagVar, strings.TrimPrefix(leakcheck.Tag(), leakcheck.TagVar+"="))
	const deadline = 1500 * time.Millisecond
	start := time.Now()
	out, err := child.Probe(childtest.TestBinary(t), nil, deadline, 1024)
	elapsed := time.Since(start)
	if !errors.Is(err, child.ErrDeadline) || elapsed < deadline || elapsed > deadline+2*time.Second {
		t.Fatalf("Probe: %q, %v after %v; want child.ErrDeadline just after %v", out, err, elapsed, deadline)
	}
	gpid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if perr != nil {
		t.Fatalf("probe output %q", out)
	}
	if ws := childtest.ReapPid(t, gpid, 2*time.Second); ws.Signal() != syscall.SIGKILL {
		t.Errorf("same-group grandchild: %v, want SIGKILL", ws)
	}
}

// TestProbeOrphanHoldingPipe: the probe exits 0 at once but leaves a setsid'd
// grandchild holding its stdout; child.Probe returns at the deadline with the
// output and no error.
func TestProbeOrphanHoldingPipe(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv(childtest.HelperVar, "probe-orphan")
	t.Setenv(leakcheck.TagVar, strings.TrimPrefix(leakcheck.Tag(), leakcheck.TagVar+"="))
	const deadline = time.Second
	start := time.Now()
	out, err := child.Probe(childtest.TestBinary(t), nil, deadline, 1024)
	elapsed := time.Since(start)
	var gpid int
	if f := bytes.Fields(out); len(f) == 2 {
		gpid, _ = strconv.Atoi(string(f[1]))
	}
	if gpid > 0 {
		unix.Kill(gpid, unix.SIGKILL)
		childtest.ReapPid(t, gpid, 2*time.Second)
	}
	if err != nil || !bytes.HasPrefix(out, []byte("ok ")) || elapsed > deadline+2*time.Second {
		t.Fatalf("Probe: %q, %v after %v", out, err, elapsed)
	}
}
