package wire

import (
	"slices"
	"strings"
	"sync"

	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/typed"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
)

// WithImports adds to the stubs' header what the run may import besides
// the interpreter's own packages (docs/packages.md §4): the modules the fork
// server preloaded, the packages it names, installed for it, and those the
// allow-list lets it name. Stubs of a daemon with neither a preload nor
// packages on demand are unchanged.
func WithImports(stubs string, preload, asked []string, allow wheelset.AllowList) string {
	return intoHeader(stubs, PreloadNote(preload)+PackagesNote(asked, allow))
}

// intoHeader adds lines, each ending in a line break, at the end of the
// stubs' header (their first paragraph; all of stubs when it has one only).
func intoHeader(stubs, lines string) string {
	end := strings.Index(stubs, "\n\n")
	if lines == "" || end < 0 {
		return stubs + lines
	}
	return stubs[:end+1] + lines + stubs[end+1:]
}

// PreloadNote is the comment line naming the modules the fork server
// imported before it served (CODERUN_PRELOAD): a run imports them for free.
// "" for none.
func PreloadNote(modules []string) string {
	if len(modules) == 0 {
		return ""
	}
	return "# Preloaded, so importing them costs nothing: " + strings.Join(modules, ", ") + ".\n"
}

// PackagesNote is the comment lines that say what a run may import besides
// the interpreter's own packages: those asked for (installed for it) and
// those the allow-list lets it name; "" when packages on demand are off.
func PackagesNote(asked []string, allow wheelset.AllowList) string {
	if !allow.Enabled() {
		return ""
	}
	var b strings.Builder
	if len(asked) > 0 {
		b.WriteString("# Packages installed for this run: " + strings.Join(asked, ", ") + ".\n")
	}
	allowed := allow.Describe()
	if slices.Contains(allowed, "*") {
		b.WriteString(`# Any package of the index can be installed: name it in the run's "packages" before importing it.` + "\n")
	} else {
		b.WriteString(`# Packages installable on demand (name them in the run's "packages" to import them): ` + strings.Join(allowed, ", ") + ".\n")
	}
	return b.String()
}

// WithEgressLine adds to the stubs' header the hosts a run may reach
// through the egress proxy (the run's policy; nil: no proxy, no line).
func WithEgressLine(stubs string, policy *egress.Policy) string {
	if policy == nil {
		return stubs
	}
	return intoHeader(stubs, "# "+EgressLine(policy))
}

// EgressLine is the sentence that tells a model which hosts a run may
// reach through the egress proxy, with its line break; "" for no policy.
func EgressLine(policy *egress.Policy) string {
	switch {
	case policy == nil:
		return ""
	case policy.Empty():
		return "Egress: none (the egress policy allows no host).\n"
	}
	line := "Egress: HTTP(S) through HTTP_PROXY/HTTPS_PROXY to " + strings.Join(policy.Entries(), ", ") +
		" only (a refused host answers 403)."
	if s := policy.SecretsText(); len(s) > 0 {
		line += " The proxy adds credentials (an env variable holds a placeholder: use it as the credential): " +
			strings.Join(s, "; ") + "."
	}
	return line + "\n"
}

// renderedStubs remembers the stubs of the last few distinct describe
// requests: a host describes the same bindings turn after turn, and rendering
// 50 nested declarations takes milliseconds.
var renderedStubs stubsCache

const maxRenderedStubs = 8

// stubsCache is keyed by what the stubs are a function of: budgets, Python
// version, globals, and each function — a typed one by identity (the typed
// package gives the same *Function for the same declaration; an entry holds
// its functions, so no pointer is reused while it is cached), an untyped one
// by name.
type stubsCache struct {
	mu      sync.Mutex
	entries []stubsEntry // most recently used last
}

type stubsEntry struct {
	limits protocol.Limits
	python string
	nss    []typed.Namespace
	text   string
}

func (c *stubsCache) text(limits protocol.Limits, python string, nss []typed.Namespace) string {
	c.mu.Lock()
	for i, e := range c.entries {
		if e.limits == limits && e.python == python && sameNamespaces(e.nss, nss) {
			c.entries = append(append(c.entries[:i:i], c.entries[i+1:]...), e)
			c.mu.Unlock()
			return e.text
		}
	}
	c.mu.Unlock()
	text := typed.Render(limits, python, nss).Text
	c.mu.Lock()
	if len(c.entries) == maxRenderedStubs {
		c.entries = append(c.entries[:0:0], c.entries[1:]...)
	}
	c.entries = append(c.entries, stubsEntry{limits, python, nss, text})
	c.mu.Unlock()
	return text
}

func sameNamespaces(a, b []typed.Namespace) bool {
	return slices.EqualFunc(a, b, func(x, y typed.Namespace) bool {
		return x.Global == y.Global && slices.EqualFunc(x.Functions, y.Functions, sameFunction)
	})
}

func sameFunction(x, y *typed.Function) bool {
	return x == y || (!x.Typed && !y.Typed && x.Name == y.Name)
}

// stubNamespaces is the validated bindings as the typed renderer takes them;
// a name entry is an untyped function.
func stubNamespaces(nss []protocol.Namespace) []typed.Namespace {
	out := make([]typed.Namespace, len(nss))
	for i, ns := range nss {
		fns := make([]*typed.Function, len(ns.Names))
		for j, name := range ns.Names {
			fns[j] = &typed.Function{Name: name}
			if ns.Checks != nil && ns.Checks[j] != nil {
				fns[j] = ns.Checks[j].(*typed.Function) // validateFunctions put it there
			}
		}
		out[i] = typed.Namespace{Global: ns.Global, Functions: fns}
	}
	return out
}
