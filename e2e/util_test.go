package e2e

import (
	"bytes"
	"cmp"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helpers of the e2e tests that do not talk to the daemon: its environment,
// run parameters, expectations on run results.

func strconvItoa(n int) string { return strconv.Itoa(n) }

// lockedBuffer collects the daemon's stderr while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// logged waits up to 30 s for s to appear in a daemon's collected stderr.
// The daemon's stderr reaches the buffer through a pipe copied by a goroutine
// of its own, so a line written before a response on stdout (or before a
// metric moved) may still be in flight when the test has seen that response.
func (l *lockedBuffer) logged(s string) bool {
	return eventually(func() bool { return strings.Contains(l.String(), s) })
}

// eventually polls cond for up to 30 s and reports whether it came to hold.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// waitFor fails the test unless cond comes to hold within 30 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	if !eventually(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// environ is the test's environment without CODERUN_* variables, plus env,
// plus TMPDIR=t.TempDir() unless env sets TMPDIR: whatever the daemon stages
// stays in the test's own directory, never in the machine's (see
// leakcheck.Suite in TestMain).
func environ(t *testing.T, env map[string]string) []string {
	var out []string
	if _, ok := env["TMPDIR"]; !ok {
		out = append(out, "TMPDIR="+t.TempDir())
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CODERUN_") && !strings.HasPrefix(kv, "TMPDIR=") {
			out = append(out, kv)
		}
	}
	if _, ok := env["CODERUN_PYTHON_BIN"]; !ok && !defaultPython(env) {
		out = append(out, "CODERUN_PYTHON_BIN="+realPython)
	}
	if _, ok := env["CODERUN_ISOLATION"]; !ok && !defaultTier(env) {
		out = append(out, "CODERUN_ISOLATION="+suiteTier)
	}
	for k, v := range env {
		if k != useDefaultPython && k != workDir && k != useDefaultTier && k != asNobody {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// suiteTier is the isolation tier of every daemon the suite starts whose
// test does not set CODERUN_ISOLATION itself: E2E_ISOLATION (make
// test-e2e-sandbox runs the suite again with "sandbox"), else tier process.
// The daemon's own default, auto, is the subject of TestDefaultTier.
var suiteTier = cmp.Or(os.Getenv("E2E_ISOLATION"), "process")

// useDefaultTier in env leaves CODERUN_ISOLATION unset.
const useDefaultTier = "E2E_DEFAULT_TIER"

func defaultTier(env map[string]string) bool { _, ok := env[useDefaultTier]; return ok }

// onlyInTier skips a test whose expectations hold in one tier only.
func onlyInTier(t *testing.T, tier string) {
	t.Helper()
	if suiteTier != tier {
		t.Skipf("tier %s only (this pass runs tier %s)", tier, suiteTier)
	}
}

// workDir in env is the daemon's working directory (not an environment variable).
const workDir = "E2E_DIR"

// asNobody in env runs the daemon binary it names as uid and gid 65534
// (the suite must be root); not an environment variable.
const asNobody = "E2E_AS_NOBODY"

// useDefaultPython in env leaves CODERUN_PYTHON_BIN unset.
const useDefaultPython = "E2E_DEFAULT_PYTHON"

func defaultPython(env map[string]string) bool { _, ok := env[useDefaultPython]; return ok }

// prog builds run params from a program and extra members.
func prog(program string, extra ...string) string {
	b, _ := json.Marshal(program)
	s := `{"program":` + string(b)
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

func expectOK(t *testing.T, r runResult, value string) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("run failed: %+v (logs %q)", *r.Error, r.Logs)
	}
	if compact(r.Value) != value {
		t.Fatalf("value %s, want %s", r.Value, value)
	}
}

func expectFailure(t *testing.T, r runResult, kind, message string) {
	t.Helper()
	if r.Error == nil || r.Error.Kind != kind || r.Error.Message != message {
		t.Fatalf("got error %+v value %s, want %s «%s»", r.Error, r.Value, kind, message)
	}
	if r.Value != nil {
		t.Errorf("a failed run carries a value %s", r.Value)
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
