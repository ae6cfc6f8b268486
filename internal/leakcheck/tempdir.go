package leakcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// TempPattern names what no test may leave in the machine's temporary
// directory: the daemon's directories (and any a test names like them).
const TempPattern = "coderun-*"

// suiteGrace is how long Suite waits for the temporary directory to be as it
// was (a daemon's watchdog removing its directories); a variable for tests.
var suiteGrace = DefaultTimeout

// Runner is what Suite runs: a *testing.M.
type Runner interface{ Run() int }

// Suite runs the suite m and returns its exit code, made 1 when an entry
// matching TempPattern appeared in os.TempDir() (the machine's, normally
// /tmp) while it ran and is still there a few seconds after it ended; each
// such entry is named on stderr. Call it from TestMain, as
// os.Exit(leakcheck.Suite(m)), after setting up nothing that is itself named
// so. The tests of a suite give every daemon, fork server and child they
// start a TMPDIR of their own (t.TempDir()), so anything appearing here came
// from something they did not.
func Suite(m Runner) int {
	before := tempEntries()
	code := m.Run()
	if left := leftInTempDir(before, suiteGrace); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "leakcheck: the suite left %d entries named %s in %s:\n\t%s\n",
			len(left), TempPattern, os.TempDir(), strings.Join(left, "\n\t"))
		code = max(code, 1)
	}
	return code
}

// leftInTempDir waits (polling) at most timeout for the entries matching
// TempPattern in os.TempDir() to be a subset of before, and returns those
// that are not, sorted.
func leftInTempDir(before map[string]bool, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		var left []string
		for name := range tempEntries() {
			if !before[name] {
				left = append(left, filepath.Join(os.TempDir(), name))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			slices.Sort(left)
			return left
		}
		time.Sleep(pause)
	}
}

// tempEntries returns the names of the entries matching TempPattern in
// os.TempDir() now.
func tempEntries() map[string]bool {
	paths, _ := filepath.Glob(filepath.Join(os.TempDir(), TempPattern)) // the pattern is valid
	m := make(map[string]bool, len(paths))
	for _, p := range paths {
		m[filepath.Base(p)] = true
	}
	return m
}
