package rpc

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/typed"
)

// describe answers bindings/describe (SPEC-2 §1.4): the stubs a model reads
// for these bindings under the run's effective budgets. The params pass
// run's validation; nothing is queued and no child is started, so it is
// answered in arrival order from the read loop.
func (s *Server) describe(id reqID, params []byte) {
	cfg := s.opts.Daemon
	nss, limits, err := validateDescribe(params, cfg.Limits)
	if err != nil {
		s.w.replyError(&id, protocol.CodeInvalidParams, err.Error())
		return
	}
	stubs := typed.Render(session.EffectiveLimits(cfg.Limits, limits), cfg.PythonVersion, stubNamespaces(nss))
	s.w.frame(encodeDescribe(id.text, stubs.Text))
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

// encodeDescribe is describe's response: {"stubs": text}, the text written
// like every daemon string (no HTML escaping, so "->" stays readable).
func encodeDescribe(id, stubs string) []byte {
	b := appendHead(make([]byte, 0, 64+len(stubs)), id, "", "result")
	b = appendString(append(b, `{"stubs":`...), stubs)
	return append(b, "}}"...)
}
