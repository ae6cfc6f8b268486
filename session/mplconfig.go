package session

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
)

// mplConfig is the daemon's matplotlib configuration and cache directory
// (MPLCONFIGDIR, docs/containment-start-modes.md §4.5). It is made at start-up, and a
// helper interpreter builds matplotlib's font cache in it once, in the
// background; from then on every run's environment names it, and tier
// sandbox grants it read-only. A run that starts before it is built goes
// without it, as it would without the directory at all. Without matplotlib
// installed the helper builds nothing and runs are never given it.
type mplConfig struct {
	dir   *rundir.Dir
	ready atomic.Bool // the font cache is built: runs are given the directory

	mu      sync.Mutex
	builder *child.Process // while the helper runs
	closed  bool
	done    chan struct{} // closed once the helper has ended
}

// mplBuildTimeout bounds the helper (a font cache build reads every system
// font: seconds on a loaded machine).
const mplBuildTimeout = 2 * time.Minute

// mplBuildScript prints "built" once matplotlib's font cache is in
// MPLCONFIGDIR, or "absent" when matplotlib is not installed.
const mplBuildScript = `import importlib.util
if importlib.util.find_spec("matplotlib") is None:
    print("absent")
else:
    import matplotlib.font_manager
    print("built")
`

// mplRC is the directory's matplotlibrc: matplotlib's defaults (a run's
// backend is the bootstrap's, MPLBACKEND).
var mplRC = []byte("# coderun-rpc: the daemon's MPLCONFIGDIR, read-only to runs (docs/containment-start-modes.md §4.5)\n")

// newMplConfig makes the directory in tempDir; nil (and logged) when it
// cannot be made. start builds its cache.
func newMplConfig(tempDir string, log *slog.Logger) *mplConfig {
	dir, err := rundir.Make(tempDir)
	if err == nil {
		if err = dir.Do(func(fd int) error { return writeAt(fd, "matplotlibrc", mplRC) }); err != nil {
			dropDir(dir, log)
		}
	}
	if err != nil {
		log.Warn("matplotlib: cannot make the config directory; runs go without one", "err", err)
		return nil
	}
	return &mplConfig{dir: dir, done: make(chan struct{})}
}

// start builds the cache with python in the background and calls built
// once runs are given the directory.
func (c *mplConfig) start(python string, log *slog.Logger, built func()) {
	if c != nil {
		go c.build(python, log, built)
	}
}

func (c *mplConfig) path() string { return c.dir.Path() }

// env is what a run's environment gains: MPLCONFIGDIR once the cache is built.
func (c *mplConfig) env() []string {
	if c == nil || !c.ready.Load() {
		return nil
	}
	return []string{"MPLCONFIGDIR=" + c.dir.Path()}
}

// build runs the helper and marks the directory ready when it built the
// cache.
func (c *mplConfig) build(python string, log *slog.Logger, built func()) {
	defer close(c.done)
	dir := c.dir.Path()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	p, err := child.Start(child.Spec{Path: python, Args: []string{"-I", "-c", mplBuildScript},
		Env: []string{"TMPDIR=" + dir, "MPLCONFIGDIR=" + dir}, Dir: dir})
	if err != nil {
		c.mu.Unlock()
		log.Warn("matplotlib: cannot start the font cache build", "err", err)
		return
	}
	c.builder = p
	c.mu.Unlock()
	p.Conn.Close()
	var drained sync.WaitGroup
	drained.Go(func() { _, _ = io.Copy(io.Discard, p.Stderr) })
	kill := time.AfterFunc(mplBuildTimeout, func() { p.SignalGroup(syscall.SIGKILL) })
	out, _ := io.ReadAll(io.LimitReader(p.Stdout, 64))
	_, _ = io.Copy(io.Discard, p.Stdout)
	drained.Wait()
	exit, _ := p.Wait()
	kill.Stop()
	p.Stdout.Close()
	p.Stderr.Close()
	switch {
	case exit.Code == 0 && string(out) == "built\n":
		c.ready.Store(true)
		built()
		log.Info("matplotlib: font cache built; runs use it", "dir", dir)
	case exit.Code == 0 && string(out) == "absent\n":
	default:
		log.Warn("matplotlib: the font cache build failed; runs go without the directory", "exit", exit.Code,
			"signal", exit.Signal)
	}
}

// close stops the build if it still runs, waits for it and removes the
// directory (Manager.Shutdown, after every run).
func (c *mplConfig) close(log *slog.Logger) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true
	if c.builder != nil {
		c.builder.SignalGroup(syscall.SIGKILL)
	}
	c.mu.Unlock()
	<-c.done
	dropDir(c.dir, log)
}
