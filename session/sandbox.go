package session

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
)

// Isolation tiers (SPEC §8).
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
// read-only access to the interpreter's installation (its prefixes and
// sys.path, as the interpreter itself reports them) and the system library
// directories.
func sandboxFor(python string) child.Sandbox {
	ro := interpreterTrees(python)
	ro = append(ro, child.SystemLibraryDirs()...)
	return child.Sandbox{ReadOnly: dedupe(ro), MaxProcs: sandboxMaxProcs,
		MaxFiles: sandboxMaxFiles, MaxFileBytes: sandboxMaxFileBytes}
}

// interpreterTrees asks the interpreter for its prefixes and sys.path; on
// failure it falls back to the executable's grandparent directory.
func interpreterTrees(python string) []string {
	var trees []string
	exe := python
	if real, err := filepath.EvalSymlinks(python); err == nil {
		exe = real
	}
	trees = append(trees, filepath.Dir(python), filepath.Dir(exe))
	out, err := child.Probe(python, []string{"-I", "-c",
		"import sys\nfor p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path): print(p)"},
		5*time.Second, 64<<10)
	if err != nil {
		return append(trees, filepath.Dir(filepath.Dir(exe)))
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
