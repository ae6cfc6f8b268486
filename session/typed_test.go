package session

import (
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/typed"
)

// typedTools is the "tools" namespace of typed declarations, as rpc's
// validation builds it.
func typedTools(t *testing.T, decls ...string) []protocol.Namespace {
	ns := protocol.Namespace{Global: "tools", Checks: make([]protocol.Checker, len(decls)),
		Signatures: make([]*protocol.Signature, len(decls))}
	for i, d := range decls {
		f, err := typed.Compile("tools", []byte(d))
		if err != nil {
			t.Fatal(err)
		}
		ns.Names = append(ns.Names, f.Name)
		ns.Checks[i], ns.Signatures[i] = f, f.Method("tools").Signature
	}
	return []protocol.Namespace{ns}
}

// TestTypedCalls: a typed call's arguments are checked before the client
// sees it (refused: TypeError, not sent, not counted), its result after.
func TestTypedCalls(t *testing.T) {
	search := `{"name":"search","parameters":{"type":"object","properties":{"q":{"type":"string"},` +
		`"limit":{"type":"integer"}},"required":["q"]},"returns":{"type":"array","items":{"type":"string"}}}`
	refused := "tools.search(): invalid arguments: /limit: expected integer, but got string"
	runCases(t, nil, []tcase{
		{name: "args-refused", bindings: typedTools(t, search), client: map[string]behaviour{"search": constV(`["a"]`)},
			program: "try:\n    await tools.search('x', limit='5')\nexcept TypeError as e:\n    return str(e)",
			value:   `"` + refused + `"`, nCalls: 0},
		{name: "refused-then-called", bindings: typedTools(t, search), client: map[string]behaviour{"search": echo()},
			program: "try:\n    await tools.search(limit=1)\nexcept TypeError:\n    pass\nreturn await tools.search('x', 2)",
			kind:    protocol.KindException, excType: "RuntimeError", nCalls: 1,
			contains: []string{"tools.search(): the host's result did not match the declared returns schema: (root): expected array, but got object"}},
		{name: "result-ok", bindings: typedTools(t, search), client: map[string]behaviour{"search": constV(`["a","b"]`)},
			program: "return await tools.search(q='x')", value: `["a","b"]`, nCalls: 1},
	})
}
