//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/childtest"
	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

// sandboxDaemonVar makes the test binary a stand-in daemon (checked first in
// TestMain): it starts a sandboxed python3 that sleeps, prints the init's
// pid, and sleeps. With nsLimitVar set as well it first sets its user
// namespace's namespace limits to that value (it must be root there).
const (
	sandboxDaemonVar = "CHILD_SANDBOX_DAEMON"
	nsLimitVar       = "CHILD_SANDBOX_NS_LIMIT"
)

func TestMain(m *testing.M) {
	HelperMain(os.Args) // the sandbox inits and probes these tests start
	if exe := os.Getenv(sandboxDaemonVar); exe != "" {
		standInDaemon(exe)
	}
	childtest.Main(m)
}

func standInDaemon(exe string) {
	if limit := os.Getenv(nsLimitVar); limit != "" {
		names, _ := filepath.Glob("/proc/sys/user/max_*_namespaces")
		for _, n := range names {
			if err := os.WriteFile(n, []byte(limit), 0); err != nil {
				fmt.Println("error", err)
				unix.Exit(1)
			}
		}
	}
	dir, _ := os.MkdirTemp("", "coderun-daemon-")
	_, ro, _ := strings.Cut(os.Getenv("CHILD_SANDBOX_RO"), "=")
	p, err := Start(child.Spec{Path: exe, Args: []string{"-I", "-c", "import time; time.sleep(60)"}, Dir: dir,
		Env: []string{"TMPDIR=" + dir, "LEAKCHECK_OWNER=" + os.Getenv("LEAKCHECK_OWNER")}},
		Config{ReadOnly: strings.Split(ro, "\n"), MaxProcs: 16, MaxFiles: 64, MaxFileBytes: 1 << 20})
	if err != nil {
		fmt.Println("error", err)
		unix.Exit(1)
	}
	fmt.Printf("%d\n", p.Pid)
	time.Sleep(60 * time.Second)
	unix.Exit(0)
}

// The containment tests of tier sandbox run the real interpreter with small
// -c scripts: what is under test is the sandbox, not the bootstrap.

var (
	pythonOnce sync.Once
	pythonExe  string
	pythonRO   []string
	pythonErr  error
)

// testPython resolves the real interpreter behind python3 (pyenv shims
// included) and the trees it reads, as the daemon's configuration would.
func testPython(t *testing.T) (string, []string) {
	t.Helper()
	pythonOnce.Do(func() {
		path, err := exec.LookPath("python3")
		if err != nil {
			pythonErr = err
			return
		}
		trees, err := InterpreterTrees(path)
		if err != nil || len(trees) == 0 {
			pythonErr = fmt.Errorf("python3: %v (trees %q)", err, trees)
			return
		}
		pythonExe, pythonRO = trees[0], append(trees, SystemLibraryDirs()...)
	})
	if pythonErr != nil {
		t.Skipf("no python3 to sandbox: %v", pythonErr)
	}
	return pythonExe, pythonRO
}

func testSandbox(t *testing.T) Config {
	_, ro := testPython(t)
	return Config{ReadOnly: ro, MaxProcs: 64, MaxFiles: 256, MaxFileBytes: 1 << 20}
}

// runResult is a finished sandboxed (or plain) run.
type runResult struct {
	exit           child.Exit
	stdout, stderr string
}

// startPython starts python3 -I -c script in a fresh run directory, under
// the sandbox when sb is non-nil, with the leakcheck tag in its environment.
func startPython(t *testing.T, sb *Config, script string, args ...string) (*child.Process, string) {
	t.Helper()
	exe, _ := testPython(t)
	dir := t.TempDir()
	spec := child.Spec{Path: exe, Args: append([]string{"-I", "-c", script}, args...), Dir: dir,
		Env: []string{"TMPDIR=" + dir, leakcheck.Tag()}}
	var p *child.Process
	var err error
	if sb != nil {
		p, err = Start(spec, *sb)
	} else {
		p, err = child.Start(spec)
	}
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { childtest.Discard(p) }) // a test that failed half-way
	return p, dir
}

// finish reads both pipes to end of stream and reaps, within timeout.
func finish(t *testing.T, p *child.Process, timeout time.Duration) runResult {
	t.Helper()
	defer spawn.CloseFiles(p.Conn, p.Stdout, p.Stderr)
	var wg sync.WaitGroup
	var out, errOut []byte
	wg.Add(2)
	go func() { defer wg.Done(); out = spawn.ReadBounded(p.Stdout, 1<<20) }()
	go func() { defer wg.Done(); errOut = spawn.ReadBounded(p.Stderr, 1<<20) }()
	p.Stdout.SetReadDeadline(time.Now().Add(timeout))
	p.Stderr.SetReadDeadline(time.Now().Add(timeout))
	e := childtest.WaitExit(t, p, timeout)
	wg.Wait()
	return runResult{e, string(out), string(errOut)}
}

func runPython(t *testing.T, sb *Config, script string, args ...string) runResult {
	t.Helper()
	p, _ := startPython(t, sb, script, args...)
	return finish(t, p, 20*time.Second)
}

// attemptPrelude starts a probe script: attempt(f) is "ok", or the name of
// the OSError f raised.
const attemptPrelude = `import json
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return e.__class__.__name__
`

// hostFile creates a host file of the given mode holding "x", in a
// directory anyone may search: reachable by path from the sandbox, where
// only Landlock decides.
func hostFile(t *testing.T, mode os.FileMode) string {
	t.Helper()
	host := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(host, []byte("x"), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(host), 0o755)
	return host
}

func mustJSON(t *testing.T, r runResult, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("decoding %q (exit %+v, stderr %q): %v", r.stdout, r.exit, r.stderr, err)
	}
}
