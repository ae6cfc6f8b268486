// Package leakcheck fails a test that leaves a goroutine, an open file
// descriptor or a process behind (CONTRIBUTING.md habit 11, after tailscale's
// ResourceCheck).
//
// Usage, first thing in a test (so its cleanup runs last):
//
//	func TestX(t *testing.T) {
//		leakcheck.Check(t)
//		...
//	}
//
// Processes are found two ways: direct children of the test binary (by the
// ppid in /proc/<pid>/stat, zombies included, so an unreaped child is a
// leak), and any process whose environment contains Tag() — put it in the
// environment of helpers you start to catch grandchildren that escaped with
// setsid and were reparented away. Leaked processes are reported and then
// SIGKILLed (and reaped when they are our children) so one failing test does
// not poison the next.
//
// Not for tests that call t.Parallel: goroutines, descriptors and children of
// concurrently running tests are indistinguishable from leaks.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TagVar is the environment variable Tag sets.
const TagVar = "LEAKCHECK_OWNER"

// Tag returns the environment entry ("LEAKCHECK_OWNER=<pid of this test
// binary>") that marks a process as belonging to this test binary.
func Tag() string { return TagVar + "=" + strconv.Itoa(os.Getpid()) }

// DefaultTimeout is how long Check waits for resources to return to the
// baseline before reporting them.
const DefaultTimeout = 5 * time.Second

// defaultIgnored are goroutines the standard library starts lazily and keeps
// for the life of the process, likewise the module's spawner thread (started
// on the first fork, see child/internal/spawn), and the runtime's finalizer
// and cleanup goroutines, which show up (with an id unseen in the baseline)
// only while running user code.
var defaultIgnored = []string{"os/signal.loop", "runtime.ensureSigM", "runtime.runFinalizers", "runtime.runCleanups",
	"child/internal/spawn.spawner"}

// Option adjusts Check and Snapshot.Leaks.
type Option func(*config)

type config struct {
	timeout time.Duration
	ignored []string
}

// Timeout sets how long to wait for the baseline (default DefaultTimeout).
func Timeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// IgnoreGoroutines ignores new goroutines whose stack contains any of substrs
// (e.g. a function name of a deliberate, process-lifetime goroutine).
func IgnoreGoroutines(substrs ...string) Option {
	return func(c *config) { c.ignored = append(c.ignored, substrs...) }
}

// Check takes a snapshot now and, at the end of the test, fails it if any
// goroutine, descriptor or process has not returned to the snapshot within
// the timeout.
func Check(t testing.TB, opts ...Option) {
	t.Helper()
	s := Take()
	t.Cleanup(func() {
		if leaks := s.Leaks(opts...); len(leaks) > 0 {
			t.Errorf("leakcheck: %d leaked resource(s):\n%s", len(leaks), strings.Join(leaks, "\n"))
		}
	})
}

// Snapshot is the set of goroutines, descriptors and processes at one time.
type Snapshot struct {
	goroutines map[int]string   // id → stack
	fds        map[int]string   // fd → readlink target
	procs      map[procKey]stat // every process on the machine
}

type procKey struct {
	pid   int
	start uint64
}

// Take records the current goroutines, descriptors and processes. It first
// creates and closes a pipe so the runtime poller's own descriptors (created
// on first use and kept forever) are part of the baseline.
func Take() *Snapshot {
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	return &Snapshot{goroutines: goroutines(), fds: fds(), procs: procs()}
}

// Leaks waits (polling) until nothing is left beyond the snapshot or the
// timeout passes, and describes what is left, one line (or stack) each.
// Leaked processes are SIGKILLed after being described.
func (s *Snapshot) Leaks(opts ...Option) []string {
	c := config{timeout: DefaultTimeout, ignored: defaultIgnored}
	for _, o := range opts {
		o(&c)
	}
	deadline := time.Now().Add(c.timeout)
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		leaks, leaked := s.diff(c.ignored)
		if len(leaks) == 0 || time.Now().After(deadline) {
			killAll(leaked)
			return leaks
		}
		time.Sleep(pause)
	}
}

func (s *Snapshot) diff(ignored []string) ([]string, []procKey) {
	var leaks []string
	for id, stack := range goroutines() {
		if _, ok := s.goroutines[id]; !ok && !containsAny(stack, ignored) {
			leaks = append(leaks, "goroutine "+stack)
		}
	}
	for fd, target := range fds() {
		if old, ok := s.fds[fd]; !ok || old != target {
			leaks = append(leaks, fmt.Sprintf("fd %d -> %s", fd, target))
		}
	}
	var leaked []procKey
	for k, st := range procs() {
		if _, old := s.procs[k]; !old && ours(k.pid, st) {
			leaked = append(leaked, k)
			leaks = append(leaks, "process "+describe(k.pid))
		}
	}
	slices.Sort(leaks)
	return leaks, leaked
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// goroutines maps the id of every goroutine but the caller's to its stack.
func goroutines() map[int]string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := strings.Split(string(buf), "\n\n")
	m := make(map[int]string, len(all)-1)
	for _, g := range all[1:] { // the first is the calling goroutine
		var id int
		if _, err := fmt.Sscanf(g, "goroutine %d ", &id); err == nil {
			m[id] = g
		}
	}
	return m
}

// fds maps each open descriptor to its /proc/self/fd link target. The
// directory's own descriptor is gone by the time links are read, and skipped.
func fds() map[int]string {
	m := map[int]string{}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return m
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			m[fd] = target
		}
	}
	return m
}
