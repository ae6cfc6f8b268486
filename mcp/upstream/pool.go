package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrorClassName is the exception class every MCP binding raises a tool's
// failure as; its "tool" attribute names the tool.
const ErrorClassName = "McpToolError"

// Pool is the daemon's configured upstream servers, keyed by their key in
// the file. Nothing is started until a server is first used.
type Pool struct {
	servers map[string]*Server
	order   []*Server
}

// Caps bound what the daemon takes from each server (docs/mcp.md §2.5).
// Every field must be positive.
type Caps struct {
	MaxPages     int           // tools/list pages read in one listing
	MaxTools     int           // tools kept
	MaxStubBytes int64         // names, descriptions and schemas kept (stubBytes)
	ListTimeout  time.Duration // one listing, connecting included
	ToolsTTL     time.Duration // a list older than this is listed again in the background
	// MaxResultBytes bounds every message read from a server, and the
	// results of the calls made with Server.Call: the daemon's
	// maxUpstreamBytes, which no run may exceed.
	MaxResultBytes int64
}

// NewPool prepares specs (from LoadConfig) without starting anything;
// version is the client version the daemon reports to upstreams.
func NewPool(specs []Spec, version string, log *slog.Logger, caps Caps) *Pool {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	impl := &mcp.Implementation{Name: "coderun-rpc", Version: version}
	p := &Pool{servers: make(map[string]*Server, len(specs))}
	for _, s := range specs {
		srv := newServer(s, log, impl, caps)
		p.servers[s.Key] = srv
		p.order = append(p.order, srv)
	}
	return p
}

// OnToolsChanged sets f to be called when a server's tools were listed
// again and the new list replaced the cached one (the server said they
// changed, or the list was older than Caps.ToolsTTL); f runs on the
// listing's goroutine. Set it before the pool is used.
func (p *Pool) OnToolsChanged(f func()) {
	for _, s := range p.Servers() {
		s.onChange = f
	}
}

// Server is the server configured under key, or nil.
func (p *Pool) Server(key string) *Server {
	if p == nil {
		return nil
	}
	return p.servers[key]
}

// Servers are the configured servers, sorted by key.
func (p *Pool) Servers() []*Server {
	if p == nil {
		return nil
	}
	return p.order
}

// Close ends every connection and stops every stdio server (process group
// killed after a grace); it returns once they are gone.
func (p *Pool) Close() {
	var wg sync.WaitGroup
	for _, s := range p.Servers() {
		wg.Go(s.close)
	}
	wg.Wait()
}

// Client wraps inner so that binding calls to the globals in routes (global
// → server) go to those servers; everything else goes to inner. The run's
// calls together may receive maxUpstreamBytes of results (Budget).
func Client(inner session.Client, routes map[string]*Server, maxUpstreamBytes int64) session.Client {
	return &router{inner: inner, routes: routes, budget: NewBudget(maxUpstreamBytes), next: make(chan func())}
}

type router struct {
	inner  session.Client
	routes map[string]*Server
	budget *Budget
	next   chan func() // a call handed to an idle worker
}

// workerIdle is how long a call's goroutine waits for the run's next call
// before it exits. The SDK's call path is deep: a fresh goroutine grows
// (copies) its stack several times on every call, a reused one once. A call
// the run's fd-3 reader takes (CallBindingLent) needs no worker.
const workerIdle = 50 * time.Millisecond

// spawn runs f on an idle worker, or on a new one when none is waiting.
func (r *router) spawn(f func()) {
	select {
	case r.next <- f:
	default:
		go r.work(f)
	}
}

// work runs f, then the calls handed to it, until none comes for workerIdle.
func (r *router) work(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-r.next:
		case <-idle.C:
			return
		}
	}
}

func (r *router) Log(runID string, ev protocol.LogEvent) { r.inner.Log(runID, ev) }
func (r *router) Flush()                                 { r.inner.Flush() }

// Output forwards run/output to inner when it streams outputs (a wrapped
// client must not hide session.OutputSink).
func (r *router) Output(runID string, ev protocol.OutputEvent) {
	if s, ok := r.inner.(session.OutputSink); ok {
		s.Output(runID, ev)
	}
}

// CallBinding calls the tool upstream: sent at once when the server takes
// direct calls (Server.Start; the answer then comes from the connection's
// reader), else made with Server.Call on a worker of the run's. cancel ends
// the call (it is cancelled upstream) and answer is never invoked after it.
func (r *router) CallBinding(runID, namespace, function string, args []byte, answer func(session.Answer)) func() {
	return r.CallBindingLent(runID, namespace, function, args, answer, nil)
}

// CallBindingLent is CallBinding, where a call made with Server.Call runs on
// the goroutine that read it when lend takes it (session.LendingClient).
func (r *router) CallBindingLent(runID, namespace, function string, args []byte, answer func(session.Answer), lend func(func()) bool) func() {
	srv := r.routes[namespace]
	if srv == nil {
		return r.inner.CallBinding(runID, namespace, function, args, answer)
	}
	if r.budget.room() <= 0 { // spent: no call can be answered
		go answer(srv.answer(function, nil, srv.fail(fmt.Errorf("tool %q: %w", function, r.budget.refusal()))))
		return func() {}
	}
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	done := false
	finish := func(a session.Answer) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			done = true
			answer(a)
		}
	}
	started := srv.Start(ctx, function, args, r.budget, func(v []byte, err error) {
		finish(srv.answer(function, v, err))
	})
	if !started {
		work := func() { finish(callAnswer(ctx, srv, function, args, r.budget)) }
		if lend == nil || !lend(work) {
			r.spawn(work)
		}
	}
	return func() {
		mu.Lock()
		done = true
		mu.Unlock()
		stop()
	}
}

// callAnswer makes the call with Call, listing the tools first when needed.
func callAnswer(ctx context.Context, srv *Server, function string, args []byte, b *Budget) session.Answer {
	tools, err := srv.Tools(ctx)
	var v []byte
	if err == nil {
		v, err = srv.Call(ctx, tools.Tool(function), args, b)
	}
	return srv.answer(function, v, err)
}

// MaxErrorMessageBytes caps the message of an upstream's failure, a
// tool's own or the server's, as the program and the daemon's log get it
// (with a truncation marker): an upstream's error may be of any size, and
// one that echoes its arguments grows with them.
const MaxErrorMessageBytes = 4096

// answer is the binding answer for a call's value or error.
func (s *Server) answer(function string, v []byte, err error) session.Answer {
	if err == nil {
		return session.Answer{HasResult: true, Result: v}
	}
	msg := wireguard.CapMessage(s.spec.Redact(err.Error()), MaxErrorMessageBytes)
	var te *ToolError
	if !errors.As(err, &te) {
		s.log.Warn("mcp call failed", "function", function, "err", msg)
	}
	return session.Answer{HasError: true, Message: &msg}
}
