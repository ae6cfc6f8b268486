package session

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
// granted in parts (sandbox.Carve): a wheel puts the daemon inside site-packages,
// whose packages the program must still import. extra are further read-only
// trees (the package cache's published sets).
func sandboxFor(python, tempDir string, trees, extra []string) sandbox.Config {
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
	readOnly, listable := sandbox.Carve(dedupe(slices.Concat([]string{exe}, trees, sandbox.SystemFontDirs(), extra)), private)
	return sandbox.Config{
		ReadOnly:   readOnly,
		Listable:   listable,
		Executable: sandbox.WithoutAncestors(dedupe(sandbox.SystemExecutableDirs()), private),
		MaxProcs:   sandboxMaxProcs, MaxFiles: sandboxMaxFiles, MaxFileBytes: sandboxMaxFileBytes,
	}
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
// (docs/containment-start-modes.md §4.2): the source's Landlock domain may write its
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
// home, the source's, writable by the child (sb.Writable). It is a fork of
// the fork server when there is one and the session's address space fits
// beside it (fitsPreload), else a fresh interpreter.
func (m *Manager) sandboxSessionWorker(sb sandbox.Config, addressSpaceMb int64) (*worker, *protocol.RunError) {
	hd, err := rundir.Make(m.cfg.TempDir)
	if err != nil {
		return nil, workerExit("failed to stage the session's home in the daemon's temporary directory: " + pathless(err))
	}
	sb.Session, sb.Writable = true, []string{hd.Path()}
	start := func(spec child.Spec) (*child.Process, error) { return sandbox.Start(spec, sb) }
	if m.forker != nil && m.fitsPreload(addressSpaceMb) {
		start = func(spec child.Spec) (*child.Process, error) { return m.forker.spawnContained(spec, &sb) }
	}
	w, fail := spawnWorker(m.cfg.Python, m.mpl.env(), m.egress, hd.Make, start)
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
		if rules, err = sandbox.ForkRuleset(*m.sandbox, m.cfg.Python, root.Path(), src.proc.Pid); err == nil {
			src.home.refs.Add(1)
			return &home{dir: src.home.dir, root: root, refs: src.home.refs}, wd, rules, nil
		}
		dropDir(wd, m.log)
	}
	dropDir(root, m.log)
	return nil, nil, nil, err
}
