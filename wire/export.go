package wire

import (
	"encoding/json"
	"slices"

	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/typed"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// What the front ends (rpc, mcp, serve) share, so a run reads, is checked
// and is reported the same way on every surface.

// Param is one member of a method's params as rpc.discover and the protocol
// docs show it.
type Param struct {
	Name, Summary string
	Schema        string // JSON Schema, as text
	Required      bool
}

// Params is, per client → daemon method, the members of its params, from
// the rows it is validated with, in their order.
var Params = map[string][]Param{
	protocol.MethodInitialize:    publicParams(initializeParams),
	protocol.MethodRun:           publicParams(runParams),
	protocol.MethodDescribe:      publicParams(describeRows),
	protocol.MethodCancelRequest: publicParams(cancelParams),
	protocol.MethodSessionOpen:   publicParams(sessionOpenParams),
	protocol.MethodSessionFork:   publicParams(sessionRefParams),
	protocol.MethodSessionClose:  publicParams(sessionRefParams),
}

// publicParams turns a validation table into its Params.
func publicParams[P any](rows []param[P]) []Param {
	out := make([]Param, len(rows))
	for i, r := range rows {
		out[i] = Param{Name: r.name, Summary: r.summary, Schema: r.schema, Required: r.required}
	}
	return out
}

// LimitNames is the members of a run's "limits", in the order of
// docs/configuration.md §4.
func LimitNames() []string { return slices.Clone(limitNames) }

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
	raw, err := json.Marshal(bs) // valid JSON, as the validating scan leaves a run's
	if err != nil {
		return nil, err
	}
	return validateBindings(&wireguard.Member{Name: "bindings", Value: raw})
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
	EmitRunResult(r, func(p []byte) { b = append(b, p...) })
	return b
}
