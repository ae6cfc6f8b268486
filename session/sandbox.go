package session

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
	"github.com/coderun-rpc/coderun-rpc/protocol"
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
// read-only access to the interpreter binary and the trees it reads (trees:
// its standard library, site-packages and sys.path as
// sandbox.InterpreterTrees reports them; asked of python when nil) and to the
// system's fonts (plotting needs them), and read and execute access to the
// system's trees of installed executables and libraries — never the daemon's
// own executable or the run directories' parent. A tree that holds one is
// granted in parts (carve): a wheel puts the daemon inside site-packages,
// whose packages the program must still import.
func sandboxFor(python, tempDir string, trees []string) sandbox.Config {
	private := []string{tempDir}
	if self, err := os.Executable(); err == nil {
		private = append(private, self)
	}
	if trees == nil {
		trees, _ = sandbox.InterpreterTrees(python) // on error, the binary alone
	}
	exe := python
	if real, err := filepath.EvalSymlinks(python); err == nil {
		exe = real
	}
	readOnly, listable := carveAll(dedupe(slices.Concat([]string{exe}, trees, sandbox.SystemFontDirs())), private)
	return sandbox.Config{
		ReadOnly:   readOnly,
		Listable:   listable,
		Executable: withoutAncestors(dedupe(sandbox.SystemExecutableDirs()), private),
		MaxProcs:   sandboxMaxProcs, MaxFiles: sandboxMaxFiles, MaxFileBytes: sandboxMaxFileBytes,
	}
}

// maxCarveDepth bounds how deep carve descends towards a private path; a
// path deeper than that below a granted tree leaves the deeper parts of the
// tree ungranted rather than granting the path.
const maxCarveDepth = 16

// carveAll is trees with each tree that holds a private path carved: the
// parts to grant read-only, and the folders carved around a private path,
// to grant listing only (the import system lists a package's folder).
func carveAll(trees, private []string) (read, list []string) {
	for _, t := range trees {
		read, list = carve(t, private, 0, read, list)
	}
	return read, list
}

// carve appends tree to read when it holds no private path; else it appends
// tree to list and carves each of its entries in turn, so that everything
// of tree is granted but the private paths. Symbolic links among the entries
// are left out: a Landlock rule is opened through its path, so a link would
// grant its target; a link inside a granted part still resolves there at
// access time. A folder that cannot be listed grants nothing of it.
func carve(tree string, private []string, depth int, read, list []string) ([]string, []string) {
	inside := within(tree, private)
	if len(inside) == 0 {
		return append(read, tree), list
	}
	if depth >= maxCarveDepth || slices.Contains(inside, filepath.Clean(tree)) {
		return read, list
	}
	entries, err := os.ReadDir(tree)
	if err != nil {
		return read, list
	}
	list = append(list, tree)
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			read, list = carve(filepath.Join(tree, e.Name()), inside, depth+1, read, list)
		}
	}
	return read, list
}

// within is the paths of private that tree contains (tree itself included).
func within(tree string, private []string) []string {
	var in []string
	for _, p := range private {
		if contains(tree, p) {
			in = append(in, filepath.Clean(p))
		}
	}
	return in
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
	return slices.ContainsFunc(paths, func(p string) bool { return contains(tree, p) })
}

// contains reports whether path is tree or lies below it.
func contains(tree, path string) bool {
	rel, err := filepath.Rel(tree, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
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

// A sandboxed session and its forks share the source's namespaces
// (child/sandbox, session_linux.go) and one home directory
// (docs/containment.md §4.2): the source's Landlock domain may write its
// home, under which lie its working directory and, for each fork, a home
// of the fork's own — the fork's working directory, and the homes of its
// own forks. A fork stacks a ruleset whose only writable tree is its home,
// so it cannot write its source's directory (nor a sibling's); Landlock
// domains only narrow, so a fork of a fork is made under its source's home.

// home is a family's shared home directory, removed with the last
// member's working directory. root is the member's own home: where its
// forks' homes are made. Both are held open (rundir.Dir) and made through
// their parent's descriptor.
type home struct {
	dir  *rundir.Dir
	root *rundir.Dir
	refs *atomic.Int64
}

// release counts a member's directory removed (nil: not a sandboxed
// session's), removing the family's home after the last.
func (h *home) release(log *slog.Logger) {
	if h == nil {
		return
	}
	if h.root != h.dir {
		h.root.Close() // removed with the family's home, which holds it
	}
	if h.refs.Add(-1) == 0 {
		dropDir(h.dir, log)
	}
}

// sandboxSessionWorker starts a session child in tier sandbox: in a new
// home, the source's, writable by the child (sb.Writable).
func (m *Manager) sandboxSessionWorker(sb sandbox.Config) (*worker, *protocol.RunError) {
	hd, err := rundir.Make(m.cfg.TempDir)
	if err != nil {
		return nil, workerExit("failed to stage the session's home in the daemon's temporary directory: " + pathless(err))
	}
	sb.Session, sb.Writable = true, []string{hd.Path()}
	w, fail := spawnWorker(m.cfg.Python, hd.Make, func(spec child.Spec) (*child.Process, error) {
		return sandbox.Start(spec, sb)
	})
	if fail != nil {
		dropDir(hd, m.log)
		return nil, fail
	}
	w.home = &home{dir: hd, root: hd, refs: new(atomic.Int64)}
	w.home.refs.Add(1)
	return w, nil
}

// forkHome makes a fork's home under src's and the ruleset that confines
// the fork to it; wd is the fork's (empty) working directory inside it.
// On error nothing is left.
func (m *Manager) forkHome(src *worker) (h *home, wd *rundir.Dir, rules *os.File, err error) {
	root, err := src.home.root.Make()
	if err != nil {
		return nil, nil, nil, err
	}
	if wd, err = root.Make(); err == nil {
		if rules, err = sandbox.ForkRuleset(*m.sandbox, m.cfg.Python, root.Path()); err == nil {
			src.home.refs.Add(1)
			return &home{dir: src.home.dir, root: root, refs: src.home.refs}, wd, rules, nil
		}
		dropDir(wd, m.log)
	}
	dropDir(root, m.log)
	return nil, nil, nil, err
}
