package rpc

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// Bindings backed by upstream MCP servers (docs/mcp.md): { "global": "gh",
// "mcp": "<server key>" } instead of "functions". Validation (package wire)
// reads the form; the server's tools become the namespace's functions only
// once the server is reached, which happens off the read loop (habit 1):
// runs in the Runner WithMCP returns, describe on a goroutine of its own.

// describeMCP answers a describe whose bindings name MCP servers once they
// are reached, within the configured wall clock.
func (s *Server) describeMCP(id reqID, p wire.DescribeParams) {
	nss := p.Bindings
	eff := session.EffectiveLimits(s.opts.Daemon.Limits, p.Limits)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(eff.MaxWallMs)*time.Millisecond)
	defer cancel()
	_, cuts, err := wire.ResolveMCP(ctx, s.opts.MCP, nss)
	if err != nil {
		s.w.replyError(&id, protocol.CodeInternalError, err.Error())
		return
	}
	s.w.frame(encodeDescribe(id.text, s.opts.Daemon.Stubs(p)+cuts))
}

// WithMCP returns a Runner that reaches the MCP servers a run's bindings name
// before handing the run to inner, and routes the run's calls to them. The
// time spent reaching a server counts against the run's wall clock; a server
// that cannot be reached ends the run with an error naming it.
func WithMCP(inner wire.Runner, pool *upstream.Pool, cfg protocol.Limits) wire.Runner {
	return &mcpRunner{Runner: inner, pool: pool, cfg: cfg, pending: map[*pendingRun]bool{}}
}

type mcpRunner struct {
	wire.Runner
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
	run  wire.Canceler // once handed on
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

func (m *mcpRunner) Submit(runID string, p protocol.RunParams, c session.Client, onResult func(protocol.Result)) (wire.Canceler, error) {
	if !wire.HasMCP(p.Bindings) {
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
	routes, _, err := wire.ResolveMCP(rctx, m.pool, p.Bindings)
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
