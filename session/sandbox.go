package session

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
)

// Isolation tiers (docs/containment.md §2–§3).
const (
	IsolationProcess = "process"
	IsolationSandbox = "sandbox"
)

// Tier-sandbox bounds per run (README documents them).
const (
	sandboxMaxProcs     = 256       // tasks (processes and threads) of the program and its descendants
	sandboxMaxFiles     = 1024      // RLIMIT_NOFILE
	sandboxMaxFileBytes = 256 << 20 // RLIMIT_FSIZE, and the run's /dev/shm size
)

// sandboxFor builds the tier-sandbox description for the frozen interpreter:
// read-only access to the interpreter binary, its standard library,
// site-packages and sys.path (as the interpreter itself reports them), and
// read and execute access to the system's trees of installed executables and
// libraries — never a tree that holds the daemon's own executable or the run
// directories' parent.
func sandboxFor(python, tempDir string) sandbox.Config {
	private := []string{tempDir}
	if self, err := os.Executable(); err == nil {
		private = append(private, self)
	}
	return sandbox.Config{
		ReadOnly:   withoutAncestors(dedupe(interpreterTrees(python)), private),
		Executable: withoutAncestors(dedupe(sandbox.SystemExecutableDirs()), private),
		MaxProcs:   sandboxMaxProcs, MaxFiles: sandboxMaxFiles, MaxFileBytes: sandboxMaxFileBytes,
	}
}

// treesScript prints the paths an interpreter needs to run: the binary, the
// standard library, site-packages, libpython's directory and sys.path.
const treesScript = `import os, sys, sysconfig
paths = [os.path.realpath(sys.executable)]
paths += [sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
paths += [sysconfig.get_config_var("LIBDIR") or ""] + sys.path
print("\n".join(p for p in paths if p))`

// interpreterTrees asks the interpreter for the trees it reads; on failure
// it falls back to the executable alone (runs then fail visibly, never
// silently wider).
func interpreterTrees(python string) []string {
	exe := python
	if real, err := filepath.EvalSymlinks(python); err == nil {
		exe = real
	}
	trees := []string{exe}
	out, err := child.Probe(python, []string{"-I", "-c", treesScript}, 5*time.Second, 64<<10)
	if err != nil {
		return trees
	}
	for _, line := range strings.Split(string(out), "\n") {
		if p := strings.TrimSpace(line); filepath.IsAbs(p) {
			if _, err := os.Stat(p); err == nil {
				trees = append(trees, p)
			}
		}
	}
	return trees
}

// withoutAncestors drops every tree that contains one of the private paths.
func withoutAncestors(trees, private []string) []string {
	out := trees[:0]
	for _, t := range trees {
		if !containsAny(t, private) {
			out = append(out, t)
		}
	}
	return out
}

func containsAny(tree string, paths []string) bool {
	for _, p := range paths {
		rel, err := filepath.Rel(tree, filepath.Clean(p))
		if err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0]
	for _, p := range in {
		p = filepath.Clean(p)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
