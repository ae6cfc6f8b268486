package rpc

import (
	"errors"

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
	p, err := s.opts.Daemon.validateDescribe(params)
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
	s.w.frame(encodeDescribe(id.text, s.opts.Daemon.Stubs(p)))
}

// validateDescribe checks describe's params against this daemon's budgets,
// allow-list and egress policy.
func (d Daemon) validateDescribe(params []byte) (wire.DescribeParams, error) {
	return wire.ValidateDescribe(params, d.Limits, d.Packages, d.Egress)
}

// Stubs is the text bindings/describe answers for p under this daemon: the
// stubs of p's bindings under the run's effective budgets, with what the
// run may import and the hosts it may reach in their header. The method and
// `coderun-rpc describe` both answer this, so they cannot differ.
func (d Daemon) Stubs(p wire.DescribeParams) string {
	text := wire.Stubs(session.EffectiveLimits(d.Limits, p.Limits), d.PythonVersion, p.Bindings)
	return wire.WithEgressLine(wire.WithImports(text, d.Preload, p.Packages, d.Packages), p.Egress)
}

// MsgDescribeMCP refuses `coderun-rpc describe` bindings backed by an MCP
// server: their functions are known only once the server is reached, which
// only a running daemon does.
const MsgDescribeMCP = "bindings name an MCP server (\"mcp\"): their functions are known only once the server is reached; describe them through a running daemon's bindings/describe"

// Describe is `coderun-rpc describe` (docs/configuration.md §5): params
// validated as bindings/describe validates them (an error is the method's
// −32602 message), then the method's answer. Bindings backed by an MCP
// server are refused (MsgDescribeMCP).
func (d Daemon) Describe(params []byte) (string, error) {
	p, err := d.validateDescribe(params)
	if err != nil {
		return "", err
	}
	if wire.HasMCP(p.Bindings) {
		return "", errors.New(MsgDescribeMCP)
	}
	return d.Stubs(p), nil
}

// encodeDescribe is describe's response: {"stubs": text}, the text written
// like every daemon string (no HTML escaping, so "->" stays readable).
func encodeDescribe(id, stubs string) []byte {
	b := wire.AppendHead(make([]byte, 0, 64+len(stubs)), id, "", "result")
	b = wireguard.AppendString(append(b, `{"stubs":`...), stubs)
	return append(b, "}}"...)
}
