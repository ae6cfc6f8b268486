package config

import (
	"errors"
	"strconv"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/child/forkserver"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// maxPreload bounds CODERUN_PRELOAD's modules.
const maxPreload = 64

// preloadRule is CODERUN_PRELOAD's: empty (none) or a comma-separated list
// of distinct dotted module names, "?" before one that is optional.
type preloadRule struct{}

func (preloadRule) parse(text string) (int64, error) {
	tokens := preloadTokens(text)
	if len(tokens) > maxPreload {
		return 0, errors.New("must name at most " + itoa(maxPreload) + " modules")
	}
	seen := make(map[string]bool, len(tokens))
	for _, t := range tokens {
		name := strings.TrimPrefix(t, "?")
		if !forkserver.ModuleName(name) {
			return 0, errors.New("must be module names separated by commas (" + strconv.Quote(t) +
				" is not a dotted Python name; \"?\" before one marks it optional)")
		}
		if seen[name] {
			return 0, errors.New("names module " + strconv.Quote(name) + " twice")
		}
		seen[name] = true
	}
	return 0, nil
}

func (preloadRule) summary() string {
	return "module names separated by commas, ?name optional, empty for none"
}

// preloadTokens splits CODERUN_PRELOAD's text ("" is none).
func preloadTokens(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(text, ",")
}

// findPreloadScript prints "ok NAME" or "missing NAME" for each argument
// (a module name, "?" before it or not), finding each without importing
// it: a package's submodules are looked for in the package's directories,
// so no module's code runs at start-up. Its import, in the fork server,
// is the preload's real test (docs/containment-start-modes.md §4.4).
const findPreloadScript = `import sys
from importlib.machinery import PathFinder
from importlib.util import find_spec
for token in sys.argv[1:]:
    name = token.lstrip("?")
    head, *rest = name.split(".")
    try:
        spec = find_spec(head)
    except Exception:
        spec = None
    for part in rest:
        if spec is None or not spec.submodule_search_locations:
            spec = None
            break
        spec = PathFinder.find_spec(spec.name + "." + part, list(spec.submodule_search_locations))
    print("ok" if spec is not None else "missing", name)
`

// findPreload looks each of c.Preload up in c.Python: a required module
// that is not there is an *Error; an optional one moves to
// c.PreloadSkipped.
func findPreload(c *Config, text string, probe ProbeFunc) error {
	if len(c.Preload) == 0 {
		return nil
	}
	fail := func(rule string) error { return &Error{Var: VarPreload, Value: text, Rule: rule} }
	if c.StartMode != "fork" {
		return fail("needs " + VarStartMode + "=fork (a spawned run starts from a fresh interpreter)")
	}
	out, err := probe(c.Python, append([]string{"-I", "-c", findPreloadScript}, c.Preload...),
		protocol.ProbeDeadline, 64*(maxPreload+len(text)))
	if err != nil {
		return fail("interpreter " + strconv.Quote(c.Python) + " failed to look the modules up: " + err.Error())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(c.Preload) {
		return fail("interpreter " + strconv.Quote(c.Python) + " did not report on every module")
	}
	kept := c.Preload[:0:0]
	for i, t := range c.Preload {
		name := strings.TrimPrefix(t, "?")
		switch lines[i] {
		case "ok " + name:
			kept = append(kept, t)
		case "missing " + name:
			if name == t {
				return fail("module " + strconv.Quote(name) + " is not installed for " + strconv.Quote(c.Python))
			}
			c.PreloadSkipped = append(c.PreloadSkipped, name)
		default:
			return fail("interpreter " + strconv.Quote(c.Python) + " did not report on every module")
		}
	}
	c.Preload = kept
	return nil
}
