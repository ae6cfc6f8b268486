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
// matching TempPattern is left behind; each such entry is named on stderr.
// Call it from TestMain, as os.Exit(leakcheck.Suite(m)).
//
// The suite runs with TMPDIR set to a directory of its own, so everything it
// starts that honours TMPDIR (daemons, fork servers, children, os.MkdirTemp)
// writes there, and suites running at the same time (go test runs packages
// in parallel) cannot see each other's directories. Two checks follow, each
// allowing a few seconds for a daemon's watchdog to finish: nothing matching
// TempPattern is left in that directory, and nothing new appeared in the
// machine's temporary directory (something that ignores TMPDIR).
func Suite(m Runner) int {
	machine := os.TempDir()
	before := tempEntries(machine)
	own, err := os.MkdirTemp(machine, "leakcheck-suite-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "leakcheck:", err)
		return 1
	}
	defer os.RemoveAll(own)
	// Sticky and open to all like /tmp: tests that run a daemon as another
	// user (uid 65534) stage it here too.
	if err := os.Chmod(own, 0o1777); err != nil {
		fmt.Fprintln(os.Stderr, "leakcheck:", err)
		return 1
	}
	defer os.Setenv("TMPDIR", os.Getenv("TMPDIR"))
	os.Setenv("TMPDIR", own)
	code := m.Run()
	for _, c := range []struct {
		dir    string
		before map[string]bool
	}{{own, nil}, {machine, before}} {
		if left := leftInTempDir(c.dir, c.before, suiteGrace); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "leakcheck: the suite left %d entries named %s in %s:\n\t%s\n",
				len(left), TempPattern, c.dir, strings.Join(left, "\n\t"))
			code = max(code, 1)
		}
	}
	return code
}

// leftInTempDir waits (polling) at most timeout for the entries matching
// TempPattern in dir to be a subset of before, and returns those that are
// not, sorted.
func leftInTempDir(dir string, before map[string]bool, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		var left []string
		for name := range tempEntries(dir) {
			if !before[name] {
				left = append(left, filepath.Join(dir, name))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			slices.Sort(left)
			return left
		}
		time.Sleep(pause)
	}
}

// tempEntries returns the names of the entries matching TempPattern in dir
// now.
func tempEntries(dir string) map[string]bool {
	paths, _ := filepath.Glob(filepath.Join(dir, TempPattern)) // the pattern is valid
	m := make(map[string]bool, len(paths))
	for _, p := range paths {
		m[filepath.Base(p)] = true
	}
	return m
}
