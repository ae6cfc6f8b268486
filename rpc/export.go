package rpc

import (
	"encoding/json"

	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/typed"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// What the MCP code-mode server (package mcp) shares with this server, so a
// run reads, is checked and is reported the same way on both surfaces.

// ValidateRunParams checks params as a run request's (docs/protocol.md §3.4);
// the error's text is the −32602 message.
func ValidateRunParams(params []byte, cfg protocol.Limits, allow wheelset.AllowList) (protocol.RunParams, error) {
	return validateRun(params, cfg, allow)
}

// MCPNamespaces is one mcp binding per configured server, global named after
// its key, checked by run's binding rules (a key whose identifier form is a
// reserved word is refused here, naming it).
func MCPNamespaces(pool *upstream.Pool) ([]protocol.Namespace, error) {
	type binding struct {
		Global string `json:"global"`
		MCP    string `json:"mcp"`
	}
	bs := []binding{}
	for _, s := range pool.Servers() {
		bs = append(bs, binding{s.Spec().Global, s.Spec().Key})
	}
	raw, err := json.Marshal(map[string]any{"bindings": bs})
	if err != nil {
		return nil, err
	}
	ms, err := wireguard.Members(raw, wireguard.Strict)
	if err != nil {
		return nil, err
	}
	return validateBindings(ms)
}

// Stubs renders the stubs of namespaces (resolved by ResolveMCP) as
// bindings/describe does, from the same cache.
func Stubs(limits protocol.Limits, pythonVersion string, nss []protocol.Namespace) string {
	return renderedStubs.text(limits, pythonVersion, stubNamespaces(stubView(nss)))
}

// Budgets is the line of a run's budgets the stubs carry, without its
// comment mark.
func Budgets(limits protocol.Limits) string { return typed.Budgets(limits) }

// IsStubMethod reports whether the stubs show a function named name as a
// method (an identifier, no keyword, not self).
func IsStubMethod(name string) bool { return typed.IsMethodName(name) }

// RunResultJSON is the run result object as a run response carries it.
func RunResultJSON(r protocol.Result) []byte {
	var b []byte
	emitRunResult(r, func(p []byte) { b = append(b, p...) })
	return b
}
