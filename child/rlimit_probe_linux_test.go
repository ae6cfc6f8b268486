//go:build linux

package child

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

// helperCommand is an os/exec helper, killed if it outlives 30 s.
func helperCommand(t *testing.T, mode string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, testBinary(t), args...)
	cmd.Env = []string{HelperVar + "=" + mode, leakcheck.Tag()}
	cmd.Stderr = os.Stderr
	return cmd
}

func TestParseStartTime(t *testing.T) {
	leakcheck.Check(t)
	fields := func(start string) string {
		// fields 3..22, then a few more
		f := []string{"S", "1", "2", "3", "0", "-1", "4194560", "10", "0", "0", "0", "1", "2", "0", "0", "20", "0", "1", "0", start, "123", "456"}
		return strings.Join(f, " ")
	}
	for _, tc := range []struct {
		line string
		want uint64
		ok   bool
	}{
		{"42 (sleep) " + fields("987654"), 987654, true},
		{"42 (a b) (c) " + fields("5"), 5, true},
		{"42 (x) ( y)) z) " + fields("77"), 77, true},
		{"42 ()) " + fields("18446744073709551615"), 18446744073709551615, true},
		{"42 (sleep " + fields("1"), 0, false},
		{"42 (short) S 1 2 3", 0, false},
		{"42 (bad) " + fields("-1"), 0, false},
		{"", 0, false},
	} {
		got, ok := parseStartTime([]byte(tc.line))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseStartTime(%q) = %d, %v; want %d, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestStartTime(t *testing.T) {
	leakcheck.Check(t)
	a, ok1 := StartTime(os.Getpid())
	b, ok2 := StartTime(os.Getpid())
	if !ok1 || !ok2 || a != b || a == 0 {
		t.Errorf("own start time %d %v, %d %v", a, ok1, b, ok2)
	}
	if _, ok := StartTime(0); ok {
		t.Error("start time for pid 0")
	}
	if _, ok := StartTime(-1); ok {
		t.Error("start time for pid -1")
	}
	max, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	pidMax, _ := strconv.Atoi(strings.TrimSpace(string(max)))
	if _, ok := StartTime(pidMax); ok { // pids are < pid_max
		t.Error("start time for a pid that cannot exist")
	}
}

func TestClampCPU(t *testing.T) {
	leakcheck.Check(t)
	const inf = unix.RLIM_INFINITY
	for _, tc := range []struct {
		req        int64
		soft, hard uint64
		want       int64
	}{
		{42, inf, inf, 42}, // default (42, 43)
		{30, 5, inf, 5},    // ulimit -S -t 5
		{30, 2, 2, 1},      // ulimit -t 2 → (1, 2)
		{30, 31, 31, 30},   // (30, 31) already
		{30, 30, 30, 29},   // soft' == hard' == 30 → 29
		{30, inf, 30, 29},  // hard 30 → (30, 30) → 29
		{1, 1, 1, 1},       // hard' 1 < 2: unchanged
		{1, inf, inf, 1},   // (1, 2)
		{30, 0, 0, 0},      // a zero limit stays zero
		{9007199254740990, inf, inf, 9007199254740990},
		{9223372036854775807, inf, inf, 9223372036854775806}, // +1 saturates: soft' == hard'

		{9223372036854775807, inf, 9223372036854775807, 9223372036854775806},
	} {
		if got := clampCPU(tc.req, tc.soft, tc.hard); got != tc.want {
			t.Errorf("clampCPU(%d, %d, %d) = %d, want %d", tc.req, tc.soft, tc.hard, got, tc.want)
		}
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
	out, err := helperCommand(t, "cpu-set", args...).Output()
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
	out, err := helperCommand(t, "cpu-live").Output()
	if err != nil || string(out) != "30\n5\n" {
		t.Errorf("cpu-live: %q, %v; want 30 then 5", out, err)
	}
}

func TestProbe(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv("PROBE_VAR", "from the caller")
	t.Setenv(leakcheck.TagVar, strings.TrimPrefix(leakcheck.Tag(), leakcheck.TagVar+"="))
	wd, _ := os.Getwd()

	out, err := Probe("/bin/sh", []string{"-c", `echo "$PROBE_VAR"; pwd; echo ignored >&2`}, 5*time.Second, 1024)
	if err != nil || string(out) != "from the caller\n"+wd+"\n" {
		t.Errorf("env/cwd probe: %q, %v", out, err)
	}

	out, err = Probe("/bin/sh", []string{"-c", `head -c 100000 /dev/zero | tr '\0' x`}, 5*time.Second, 1024)
	if err != nil || len(out) != 1024 {
		t.Errorf("maxOut probe: %d bytes, %v; want 1024", len(out), err)
	}

	_, err = Probe("/bin/sh", []string{"-c", "echo oops >&2; exit 7"}, 5*time.Second, 1024)
	if err == nil || !strings.Contains(err.Error(), "exit status 7") || !strings.Contains(err.Error(), "oops") {
		t.Errorf("exit 7 probe: %v", err)
	}

	_, err = Probe("/bin/sh", []string{"-c", "kill -SEGV $$"}, 5*time.Second, 1024)
	if err == nil || !strings.Contains(err.Error(), "killed by signal SIGSEGV") {
		t.Errorf("signal probe: %v", err)
	}

	_, err = Probe("/definitely/not/there", nil, 5*time.Second, 1024)
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing probe: %v", err)
	}
}

// TestProbeDeadline is C223: a probe that traps SIGTERM and sleeps (with a
// same-group grandchild) is SIGKILLed at the deadline, and Probe returns
// promptly with what it printed.
func TestProbeDeadline(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv(HelperVar, "probe-trap")
	t.Setenv(leakcheck.TagVar, strings.TrimPrefix(leakcheck.Tag(), leakcheck.TagVar+"="))
	const deadline = 1500 * time.Millisecond
	start := time.Now()
	out, err := Probe(testBinary(t), nil, deadline, 1024)
	elapsed := time.Since(start)
	if !errors.Is(err, ErrDeadline) || elapsed < deadline || elapsed > deadline+2*time.Second {
		t.Fatalf("Probe: %q, %v after %v; want ErrDeadline just after %v", out, err, elapsed, deadline)
	}
	gpid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if perr != nil {
		t.Fatalf("probe output %q", out)
	}
	if ws := reapPid(t, gpid, 2*time.Second); ws.Signal() != syscall.SIGKILL {
		t.Errorf("same-group grandchild: %v, want SIGKILL", ws)
	}
}

// TestProbeOrphanHoldingPipe: the probe exits 0 at once but leaves a setsid'd
// grandchild holding its stdout; Probe returns at the deadline with the
// output and no error.
func TestProbeOrphanHoldingPipe(t *testing.T) {
	leakcheck.Check(t)
	t.Setenv(HelperVar, "probe-orphan")
	t.Setenv(leakcheck.TagVar, strings.TrimPrefix(leakcheck.Tag(), leakcheck.TagVar+"="))
	const deadline = time.Second
	start := time.Now()
	out, err := Probe(testBinary(t), nil, deadline, 1024)
	elapsed := time.Since(start)
	var gpid int
	if f := bytes.Fields(out); len(f) == 2 {
		gpid, _ = strconv.Atoi(string(f[1]))
	}
	if gpid > 0 {
		unix.Kill(gpid, unix.SIGKILL)
		reapPid(t, gpid, 2*time.Second)
	}
	if err != nil || !bytes.HasPrefix(out, []byte("ok ")) || elapsed > deadline+2*time.Second {
		t.Fatalf("Probe: %q, %v after %v", out, err, elapsed)
	}
}
