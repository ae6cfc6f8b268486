package wheelset

import (
	"bytes"
	"context"
	"os/exec"
	"runtime"
	"strings"
	"sync"
)

// compileScript compiles the source files named on its standard input
// (NUL-separated paths, relative to its working directory) into
// __pycache__, each .pyc written atomically by py_compile. A file that does
// not compile, or whose bytecode cannot be written, is skipped: importing
// it compiles it then, and reports its error as the interpreter would.
// Timestamp validation is asked for explicitly, as SOURCE_DATE_EPOCH in the
// environment would otherwise make py_compile write hash-checked files that
// every import re-hashes.
const compileScript = `import os, sys, py_compile
mode = py_compile.PycInvalidationMode.TIMESTAMP
for name in sys.stdin.buffer.read().split(b"\0"):
    if name:
        try:
            py_compile.compile(os.fsdecode(name), doraise=True, invalidation_mode=mode)
        except Exception:
            pass
`

// sourcesPerCompiler is how many source files justify one more compiling
// interpreter: starting one costs about as much as compiling a hundred
// small modules, so a small set compiles in a single process.
const sourcesPerCompiler = 100

// compileBytecode compiles sources (paths relative to root, which only the
// daemon writes) with the interpreter the set is for, isolated (-I: the
// set's folder is not on sys.path, so nothing in it shadows the standard
// library) and without site (-S: nothing installed runs). Large sets are
// split between up to GOMAXPROCS interpreters running at once.
func (c *Cache) compileBytecode(ctx context.Context, reqs []Requirement, root string, sources []string) error {
	n := min(runtime.GOMAXPROCS(0), (len(sources)+sourcesPerCompiler-1)/sourcesPerCompiler)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		var list strings.Builder
		for j := i; j < len(sources); j += n {
			list.WriteString(sources[j] + "\x00")
		}
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, c.o.Python, "-I", "-S", "-c", compileScript)
			cmd.Dir, cmd.Stdin = root, bytes.NewReader([]byte(list.String()))
			errs[i] = c.runTool(ctx, reqs, "compiling bytecode: ", cmd)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
