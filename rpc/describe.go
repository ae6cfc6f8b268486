package rpc

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wire"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// describe answers bindings/describe (docs/protocol-typed.md §10.4): the stubs a model reads
// for these bindings under the run's effective budgets. The params pass
// run's validation; nothing is queued and no child is started, so it is
// answered in arrival order from the read loop.
func (s *Server) describe(id reqID, params []byte) {
	cfg := s.opts.Daemon
	p, err := wire.ValidateDescribe(params, cfg.Limits, cfg.Packages, cfg.Egress)
	if err == nil {
		err = wire.CheckMCPServers(s.opts.MCP, p.Bindings)
	}
	if err != nil {
		s.w.replyError(&id, protocol.CodeInvalidParams, err.Error())
		return
	}
	if wire.HasMCP(p.Bindings) {
		go s.describeMCP(id, p)
		return
	}
	text := wire.Stubs(session.EffectiveLimits(cfg.Limits, p.Limits), cfg.PythonVersion, p.Bindings)
	s.w.frame(encodeDescribe(id.text, wire.WithEgressLine(wire.WithImports(text, cfg.Preload, p.Packages, cfg.Packages), p.Egress)))
}

// encodeDescribe is describe's response: {"stubs": text}, the text written
// like every daemon string (no HTML escaping, so "->" stays readable).
func encodeDescribe(id, stubs string) []byte {
	b := wire.AppendHead(make([]byte, 0, 64+len(stubs)), id, "", "result")
	b = wireguard.AppendString(append(b, `{"stubs":`...), stubs)
	return append(b, "}}"...)
}
