package rpc

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// Bindings backed by upstream MCP servers (docs/mcp.md): { "global": "gh",
// "mcp": "<server key>" } instead of "functions". Validation reads the form;
// the server's tools become the namespace's functions only once the server
// is reached, which happens off the read loop (habit 1): runs in the Runner
// WithMCP returns, describe on a goroutine of its own.

// mcpErrorClass is what an mcp binding raises a tool's failure as unless it
// declares its own errorClass: one class every mcp binding shares, its
// instances naming the tool and the server.
func mcpErrorClass(server string) *protocol.ErrorClass {
	return &protocol.ErrorClass{Name: upstream.ErrorClassName, MemberNameProperty: "tool",
		Attributes: map[string]string{"server": server}}
}

// validateMCPMember reads a binding's "mcp" member when it is present: a
// non-empty server key, and then no "functions".
func validateMCPMember(at string, ms []wireguard.Member, ns *protocol.Namespace) (bool, error) {
	m, ok := wireguard.Last(ms, "mcp")
	if !ok || wireguard.KindOf(m.Value) == wireguard.KindNull {
		return false, nil
	}
	key, ok := wireguard.DecodeString(m.Value)
	if !ok || key == "" {
		return true, reject(at + ".mcp must be the name of a configured MCP server")
	}
	if _, has := wireguard.Last(ms, "functions"); has {
		return true, reject(at + " has both \"mcp\" and \"functions\"; an mcp binding takes its functions from the server")
	}
	if ns.Global == upstream.ErrorClassName && ns.ErrorClass == nil {
		// the shared class would take the binding's own name
		return true, reject(at + ".global " + quote(ns.Global) + " is the name of the error class MCP bindings share; choose another global")
	}
	ns.MCP = key
	ns.Names = []string{}
	return true, nil
}

// sharesMCPClass reports whether an mcp binding without its own errorClass
// may inject the shared class: no other kind of global took its name.
func sharesMCPClass(ns *protocol.Namespace, injected, errorClasses map[string]bool) bool {
	n := upstream.ErrorClassName
	return ns.MCP != "" && ns.ErrorClass == nil && (!injected[n] || errorClasses[n])
}

// checkMCPServers refuses an mcp binding naming a server the daemon was not
// configured with (−32602).
func (s *Server) checkMCPServers(nss []protocol.Namespace) error {
	for i, ns := range nss {
		if ns.MCP != "" && s.opts.MCP.Server(ns.MCP) == nil {
			return reject("bindings[" + strconv.Itoa(i) + "].mcp " + quote(ns.MCP) + " is not a configured MCP server")
		}
	}
	return nil
}

func hasMCP(nss []protocol.Namespace) bool {
	for _, ns := range nss {
		if ns.MCP != "" {
			return true
		}
	}
	return false
}

// ResolveMCP fills every mcp namespace of nss from its server's tools,
// connecting to the server when needed, and returns the routes (global →
// server) for upstream.Client and a comment line per server whose tools a
// cap cut ("\n# mcp server …: tools omitted: …"). An error names the server.
func ResolveMCP(ctx context.Context, pool *upstream.Pool, nss []protocol.Namespace) (map[string]*upstream.Server, string, error) {
	routes := map[string]*upstream.Server{}
	cuts := ""
	for i := range nss {
		ns := &nss[i]
		if ns.MCP == "" {
			continue
		}
		srv := pool.Server(ns.MCP)
		tools, err := srv.Tools(ctx)
		if err != nil {
			return nil, "", err
		}
		if tools.Cut != "" {
			cuts += "\n# " + tools.Cut
		}
		ns.Names = make([]string, len(tools.Functions))
		for j, fn := range tools.Functions {
			ns.Names[j] = fn.Name
		}
		addTyped(ns, tools.Functions)
		routes[ns.Global] = srv
	}
	return routes, cuts, nil
}

// describeMCP answers a describe whose bindings name MCP servers once they
// are reached, within the configured wall clock.
func (s *Server) describeMCP(id reqID, p describeParams) {
	nss := p.nss
	eff := session.EffectiveLimits(s.opts.Daemon.Limits, p.limits)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(eff.MaxWallMs)*time.Millisecond)
	defer cancel()
	_, cuts, err := ResolveMCP(ctx, s.opts.MCP, nss)
	if err != nil {
		s.w.replyError(&id, protocol.CodeInternalError, err.Error())
		return
	}
	s.w.frame(encodeDescribe(id.text, WithEgressLine(withImports(Stubs(eff, s.opts.Daemon.PythonVersion, nss), s.opts.Daemon.Preload, p.packages, s.opts.Daemon.Packages), p.egress)+cuts))
}

// stubView is nss as the stubs show them: in an mcp namespace a tool whose
// name is not an identifier appears once, as the method of its identifier
// form, when it has one (docs/mcp.md); the program can use both.
func stubView(nss []protocol.Namespace) []protocol.Namespace {
	out := make([]protocol.Namespace, len(nss))
	for i, ns := range nss {
		out[i] = ns
		if ns.MCP == "" {
			continue
		}
		has := make(map[string]bool, len(ns.Names))
		for _, n := range ns.Names {
			has[n] = true
		}
		out[i].Names, out[i].Checks = nil, nil
		for j, n := range ns.Names {
			if alias := upstream.Identifier(n); alias == n || !has[alias] {
				out[i].Names = append(out[i].Names, n)
				out[i].Checks = append(out[i].Checks, ns.Checks[j])
			}
		}
	}
	return out
}

// WithMCP returns a Runner that reaches the MCP servers a run's bindings name
// before handing the run to inner, and routes the run's calls to them. The
// time spent reaching a server counts against the run's wall clock; a server
// that cannot be reached ends the run with an error naming it.
func WithMCP(inner Runner, pool *upstream.Pool, cfg protocol.Limits) Runner {
	return &mcpRunner{Runner: inner, pool: pool, cfg: cfg, pending: map[*pendingRun]bool{}}
}

type mcpRunner struct {
	Runner
	pool *upstream.Pool
	cfg  protocol.Limits

	mu       sync.Mutex
	pending  map[*pendingRun]bool
	wg       sync.WaitGroup
	shutting bool
}

// pendingRun is a run waiting for its servers; Cancel before it is handed
// on answers it as cancelled.
type pendingRun struct {
	stop context.CancelCauseFunc
	mu   sync.Mutex
	run  Canceler // once handed on
}

var errCancelled = errors.New(protocol.MsgCancelled)

func (p *pendingRun) Cancel() {
	p.stop(errCancelled)
	p.mu.Lock()
	r := p.run
	p.mu.Unlock()
	if r != nil {
		r.Cancel()
	}
}

func (m *mcpRunner) Submit(runID string, p protocol.RunParams, c session.Client, onResult func(protocol.Result)) (Canceler, error) {
	if !hasMCP(p.Bindings) {
		return m.Runner.Submit(runID, p, c, onResult)
	}
	ctx, stop := context.WithCancelCause(context.Background())
	pr := &pendingRun{stop: stop}
	m.mu.Lock()
	if m.shutting {
		m.mu.Unlock()
		return nil, session.ErrShuttingDown
	}
	m.pending[pr] = true
	m.wg.Add(1)
	m.mu.Unlock()
	go m.resolve(ctx, pr, runID, p, c, onResult)
	return pr, nil
}

func (m *mcpRunner) resolve(ctx context.Context, pr *pendingRun, runID string, p protocol.RunParams, c session.Client, onResult func(protocol.Result)) {
	defer m.wg.Done()
	defer func() { m.mu.Lock(); delete(m.pending, pr); m.mu.Unlock() }()
	start := time.Now()
	wall := time.Duration(session.EffectiveLimits(m.cfg, p.Limits).MaxWallMs) * time.Millisecond
	rctx, cancel := context.WithTimeout(ctx, wall)
	defer cancel()
	p.Bindings = append([]protocol.Namespace(nil), p.Bindings...) // validation's copy stays as it was
	routes, _, err := ResolveMCP(rctx, m.pool, p.Bindings)
	elapsed := time.Since(start)
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		onResult(unreachedResult(ctx, rctx, err, elapsed))
		return
	}
	p.Limits.MaxWallMs = max(1, (wall - elapsed).Milliseconds())
	pr.mu.Lock()
	defer pr.mu.Unlock()
	budget := session.EffectiveLimits(m.cfg, p.Limits).MaxUpstreamBytes
	run, err := m.Runner.Submit(runID, p, upstream.Client(c, routes, budget), onResult)
	if err != nil {
		msg := protocol.MsgShuttingDown
		if errors.Is(err, session.ErrQueueFull) {
			msg = protocol.MsgQueueFull
		}
		onResult(protocol.Result{Logs: []string{}, Error: &protocol.RunError{Kind: protocol.KindAbort, Message: msg}})
		return
	}
	pr.run = run
}

// unreachedResult is the result of a run whose servers were not reached: a
// cancel or shutdown is an abort, the wall clock running out a timeout, and
// a server that failed an exception naming it.
func unreachedResult(ctx, rctx context.Context, err error, elapsed time.Duration) protocol.Result {
	e := &protocol.RunError{Kind: protocol.KindException, Message: err.Error()}
	switch {
	case ctx.Err() != nil:
		e = &protocol.RunError{Kind: protocol.KindAbort, Message: context.Cause(ctx).Error()}
	case rctx.Err() != nil:
		e = &protocol.RunError{Kind: protocol.KindTimeout, Budget: protocol.BudgetWall, Message: err.Error()}
	}
	return protocol.Result{Logs: []string{}, Error: e, Stats: protocol.Stats{WallMs: elapsed.Milliseconds()}}
}

// Shutdown aborts the runs still waiting for a server, then shuts inner down.
func (m *mcpRunner) Shutdown() {
	m.mu.Lock()
	m.shutting = true
	for pr := range m.pending {
		pr.stop(errors.New(protocol.MsgShuttingDown))
	}
	m.mu.Unlock()
	m.wg.Wait()
	m.Runner.Shutdown()
}
