package config

import (
	"errors"
	"strconv"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// PythonNames are the names a program has a meaning for before it defines
// anything: the interpreter's builtins and its standard-library modules.
// `coderun-rpc mcp` refuses a server whose global is one of them, which a
// builtin would be hidden by or an import would hide (docs/mcp.md §2.1).
type PythonNames struct {
	Builtins, Modules map[string]bool
}

// namesArgs print dir(builtins), then sys.stdlib_module_names, one line
// each, then a last line saying the listing is whole.
var namesArgs = []string{"-I", "-c",
	"import builtins, sys; print(*dir(builtins)); print(*sorted(sys.stdlib_module_names)); print('end')"}

// namesOutputKept bounds the listing: CPython's is under 5 KB.
const namesOutputKept = 64 << 10

// ProbeNames asks the interpreter python (Config.Python) for its builtins
// and standard-library modules.
func ProbeNames(python string, opts Options) (PythonNames, error) {
	out, err := opts.probe()(python, namesArgs, protocol.ProbeDeadline, namesOutputKept)
	fail := func(why string) (PythonNames, error) {
		return PythonNames{}, errors.New("interpreter " + strconv.Quote(python) + " did not list its builtins and standard modules: " + why)
	}
	if err != nil {
		return fail(err.Error())
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) != 4 || lines[2] != "end" || lines[3] != "" {
		return fail("unexpected output")
	}
	return PythonNames{Builtins: wordsOf(lines[0]), Modules: wordsOf(lines[1])}, nil
}

func wordsOf(line string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(line) {
		m[w] = true
	}
	return m
}
