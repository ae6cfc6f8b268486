package typed

import "sync"

// maxMemoGlobals bounds how many globals one function remembers its stub
// for; a host renaming its namespaces on every run costs a render, not memory.
const maxMemoGlobals = 8

type methodMemo struct {
	mu       sync.Mutex
	byGlobal map[string]Method
}

// Method is the function's stub under global as if it were the module's only
// function: what the child needs for help(), __doc__ and the call form of a
// non-identifier name, without rendering the run's whole module. It is
// rendered once per global and remembered. Its TypedDict names are the
// unsuffixed ones; in Render's module a name another function took first
// carries a suffix.
func (f *Function) Method(global string) Method {
	f.methods.mu.Lock()
	defer f.methods.mu.Unlock()
	if m, ok := f.methods.byGlobal[global]; ok {
		return m
	}
	m := newTyper(newNamer(global, camel(global))).method(global, f)
	if f.methods.byGlobal == nil {
		f.methods.byGlobal = map[string]Method{}
	}
	if len(f.methods.byGlobal) < maxMemoGlobals {
		f.methods.byGlobal[global] = m
	}
	return m
}
