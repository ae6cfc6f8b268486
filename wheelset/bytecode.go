package wheelset

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// compileScript compiles the source files named on its standard input
// (NUL-separated: first the bytes of bytecode it may write, -1 for no
// bound, then paths relative to its working directory), within the
// address space its argument gives in bytes (0: unbounded; a source that
// needs more raises MemoryError and is skipped), into
// __pycache__, each .pyc written atomically by py_compile. A file that does
// not compile, or whose bytecode cannot be written, is left without
// bytecode (a .pyc its wheel shipped in its place is removed: an unchecked
// one would be imported instead of the source): importing it compiles it
// then, and reports its error as the interpreter would. Once what it wrote
// passes its bound it fails, naming the bound: folded constants make a .pyc
// hundreds of times its source.
// Timestamp validation is asked for explicitly, as SOURCE_DATE_EPOCH in the
// environment would otherwise make py_compile write hash-checked files that
// every import re-hashes.
const compileScript = `import os, sys, importlib.util, py_compile, resource
limit = int(sys.argv[1])
if limit > 0:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
mode = py_compile.PycInvalidationMode.TIMESTAMP
budget, *names = sys.stdin.buffer.read().split(b"\0")
left = bound = int(budget or -1)
for name in names:
    if name:
        try:
            left -= os.path.getsize(py_compile.compile(os.fsdecode(name), doraise=True, invalidation_mode=mode))
            if bound >= 0 and left < 0:
                sys.exit(f"the bytecode passed the {bound} bytes the package cache may hold")
        except Exception:
            try:
                os.remove(importlib.util.cache_from_source(os.fsdecode(name)))
            except Exception:
                pass
`

// sourcesPerCompiler is how many source files justify one more compiling
// interpreter: starting one costs about as much as compiling a hundred
// small modules, so a small set compiles in a single process.
const sourcesPerCompiler = 100

// compiler is one compiling interpreter, started before it is told what to
// compile: the interpreter starts and imports py_compile while uv runs, and
// compiles what it reads once its input is closed.
type compiler struct {
	list  *os.File   // the write end of its standard input
	ended chan error // its end, mapped by toolError; received once
	err   error
	done  bool
}

// startCompiler starts a compiler in dir (the tree it compiles, written by
// the daemon only) with the interpreter the set is for, isolated (-I: dir is
// not on sys.path, so nothing in it shadows the standard library) and
// without site (-S: nothing installed runs), its address space bounded as
// a run's is (Options.AddressSpace). Its process ends with ctx.
func (c *Cache) startCompiler(ctx context.Context, reqs []Requirement, dir string) (*compiler, error) {
	in, list, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, c.o.Python, "-I", "-S", "-c", compileScript, strconv.FormatInt(c.o.AddressSpace, 10))
	cmd.Dir, cmd.Stdin = dir, in
	stderr, err := startTool(cmd)
	in.Close() // the interpreter's now: a write after its end fails rather than blocks
	if err != nil {
		list.Close()
		return nil, c.toolError(ctx, reqs, cmd, "compiling bytecode: ", stderr, err)
	}
	p := &compiler{list: list, ended: make(chan error, 1)}
	go func() { p.ended <- c.toolError(ctx, reqs, cmd, "compiling bytecode: ", stderr, cmd.Wait()) }()
	return p, nil
}

// finish hands p the bytes of bytecode it may write (-1: no bound) and its
// sources, closes its input and waits for its end; a second call returns
// the first one's result. finish(0, nil) stops an idle compiler.
func (p *compiler) finish(budget int64, sources []string) error {
	if p.done {
		return p.err
	}
	p.done = true
	list := strings.Join(append([]string{strconv.FormatInt(budget, 10)}, sources...), "\x00")
	_, _ = p.list.WriteString(list) // a failed write: it ended, as its end says
	p.list.Close()
	p.err = <-p.ended
	return p.err
}

// compileBytecode compiles sources (paths relative to root) with first and,
// for a large set, with up to GOMAXPROCS-1 more compilers at once, each
// taking every n-th source and each failing once its bytecode passes budget
// (-1: no bound), the room the cache has left for the set: what they write
// together stays within n times that.
func (c *Cache) compileBytecode(ctx context.Context, reqs []Requirement, root string, sources []string, first *compiler, budget int64) error {
	n := max(1, min(runtime.GOMAXPROCS(0), (len(sources)+sourcesPerCompiler-1)/sourcesPerCompiler))
	compilers := []*compiler{first}
	for len(compilers) < n {
		p, err := c.startCompiler(ctx, reqs, root)
		if err != nil {
			break // fewer compilers: the ones started take every source
		}
		compilers = append(compilers, p)
	}
	errs := make([]error, len(compilers))
	var wg sync.WaitGroup
	for i, p := range compilers {
		var share []string
		for j := i; j < len(sources); j += len(compilers) {
			share = append(share, sources[j])
		}
		wg.Go(func() { errs[i] = p.finish(budget, share) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
