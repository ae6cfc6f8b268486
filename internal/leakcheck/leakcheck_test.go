//go:build linux

package leakcheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const short = 300 * time.Millisecond

func TestCleanSnapshot(t *testing.T) {
	Check(t)
	s := Take()
	done := make(chan bool)
	go func() { <-done }()
	close(done) // a goroutine that ends counts as returned
	r, w, _ := os.Pipe()
	r.Close()
	w.Close()
	if leaks := s.Leaks(Timeout(short)); len(leaks) != 0 {
		t.Fatalf("leaks: %q", leaks)
	}
}

func TestLeakedGoroutine(t *testing.T) {
	s := Take()
	block := make(chan bool)
	go func() { <-block }()
	defer close(block)
	leaks := s.Leaks(Timeout(short))
	if len(leaks) != 1 || !strings.Contains(leaks[0], "TestLeakedGoroutine") {
		t.Fatalf("leaks: %q", leaks)
	}
	if leaks := s.Leaks(Timeout(short), IgnoreGoroutines("TestLeakedGoroutine")); len(leaks) != 0 {
		t.Fatalf("ignored goroutine reported: %q", leaks)
	}
}

func TestLeakedDescriptor(t *testing.T) {
	s := Take()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	leaks := s.Leaks(Timeout(short))
	if len(leaks) != 2 || !strings.Contains(leaks[0], "pipe:") {
		t.Fatalf("leaks: %q", leaks)
	}
}

// TestLeakedChild: an unreaped direct child is reported, then killed and
// reaped by the check itself.
func TestLeakedChild(t *testing.T) {
	s := Take()
	pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	leaks := s.Leaks(Timeout(short))
	if len(leaks) != 1 || !strings.Contains(leaks[0], fmt.Sprintf("process %d (sleep)", pid)) {
		t.Fatalf("leaks: %q", leaks)
	}
	if _, err := syscall.Wait4(pid, nil, syscall.WNOHANG, nil); err != syscall.ECHILD {
		t.Fatalf("leaked child not reaped by the check: %v", err)
	}
}

// TestLeakedTaggedOrphan: a setsid'd grandchild that was reparented away is
// found by its environment tag and killed.
func TestLeakedTaggedOrphan(t *testing.T) {
	s := Take()
	cmd := exec.Command("/bin/sh", "-c", "setsid sleep 30 >/dev/null 2>&1 & echo $!")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), Tag()}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan := strings.TrimSpace(string(out))
	leaks := s.Leaks(Timeout(short))
	if len(leaks) != 1 || !strings.HasPrefix(leaks[0], "process "+orphan+" ") {
		t.Fatalf("leaks: %q (orphan %s)", leaks, orphan)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, ok := readStat(atoi(t, orphan))
		if !ok || st.state == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %s still %s", orphan, st.state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func atoi(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

type fakeTB struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func TestCheckFailsTheTest(t *testing.T) {
	f := &fakeTB{}
	Check(f, Timeout(short))
	r, w, _ := os.Pipe()
	defer w.Close()
	defer r.Close()
	for _, fn := range f.cleanups {
		fn()
	}
	if len(f.errors) != 1 || !strings.Contains(f.errors[0], "2 leaked resource(s)") {
		t.Fatalf("errors: %q", f.errors)
	}
}

func TestParseStat(t *testing.T) {
	rest := " S 77 1 1 0 -1 2097216 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0"
	st, ok := parseStat([]byte("12 (a) (b c)" + rest))
	if !ok || st.comm != "a) (b c" || st.ppid != 77 || st.start != 4242 || st.state != "S" ||
		st.flags != 2097216 || !st.kernelThread() {
		t.Fatalf("parseStat: %+v %v", st, ok)
	}
	if self, ok := readStat(os.Getpid()); !ok || self.kernelThread() {
		t.Fatalf("this process reads as %+v %v", self, ok)
	}
	if _, ok := parseStat([]byte("12 (a S 1")); ok {
		t.Fatal("parsed a truncated line")
	}
}

// suiteThat is a suite whose run does what it is told and returns code.
type suiteThat struct {
	code int
	run  func()
}

func (s suiteThat) Run() int { s.run(); return s.code }

// TestSuiteFailsWhatItLeavesInTheTempDir: Suite fails a suite that leaves an
// entry named coderun-* in its own temporary directory (what os.TempDir() is
// while it runs) or that adds one to the machine's (here a private one), and
// only one that stayed.
func TestSuiteFailsWhatItLeavesInTheTempDir(t *testing.T) {
	machine := t.TempDir()
	t.Setenv("TMPDIR", machine)
	defer func(g time.Duration) { suiteGrace = g }(suiteGrace)
	suiteGrace = short
	// mk makes name in dir, or in the suite's own temporary directory ("").
	mk := func(dir, name string) func() {
		return func() {
			if dir == "" {
				dir = os.TempDir()
			}
			if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
				t.Error(err)
			}
		}
	}
	mk(machine, "coderun-before")()
	cases := []struct {
		name string
		s    suiteThat
		want int
	}{
		{"clean", suiteThat{0, func() {}}, 0},
		{"other names", suiteThat{0, mk("", "other-1")}, 0},
		{"removed before the end", suiteThat{0, func() {
			mk("", "coderun-gone")()
			os.Remove(filepath.Join(os.TempDir(), "coderun-gone"))
		}}, 0},
		{"left in its own", suiteThat{0, mk("", "coderun-left")}, 1},
		{"left in the machine's", suiteThat{0, mk(machine, "coderun-left-machine")}, 1},
		{"failed and left", suiteThat{3, mk("", "coderun-left-too")}, 3},
		{"failed", suiteThat{2, func() {}}, 2},
	}
	for _, c := range cases {
		if got := Suite(c.s); got != c.want {
			t.Errorf("%s: Suite returned %d, want %d", c.name, got, c.want)
		}
		if os.TempDir() != machine {
			t.Fatalf("%s: TMPDIR is %s after the suite, want %s", c.name, os.TempDir(), machine)
		}
	}
}
