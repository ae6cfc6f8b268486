// Package rpc is the daemon's JSON-RPC 2.0 server on stdio (docs/protocol.md §2–§5).
//
// The read loop is this package's own: it reads the LSP header block and
// exactly Content-Length bytes (inbound.go), scans the body with wireguard's
// strict iterative scanner in Lax mode (dispatch.go), answers malformed input
// itself, routes responses to outstanding binding/call requests (bindings.go)
// and handles run, bindings/describe, $/cancelRequest and shutdown
// synchronously in arrival order (Appendix B items 5, 6). Validating a run
// compiles its typed function declarations (package typed); describe renders
// their stubs (describe.go). Every outgoing message is encoded by
// encode.go, one member order for all, and framed under one lock
// (outbound.go). sourcegraph/jsonrpc2 is not used: its decoder would close
// the connection on a deep or lossy binding result and re-marshal params, and
// its encoder escapes HTML and caps nesting.
package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// Options configure a Server. The caller builds everything from the
// daemon's configuration; rpc itself never reads it.
type Options struct {
	In     io.Reader   // the client's requests (stdin)
	Out    io.Writer   // protocol frames only (the duplicated fd 1)
	Runner wire.Runner // executes runs (NewRunner adapts a session.Manager)
	// Sessions serves session/* (NewRunner's value); nil: no sessions.
	Sessions wire.Sessions
	Daemon   Daemon // what initialize reports; its Limits cap every run's
	Logger   *slog.Logger
	Version  string // serverInfo.version
	// MCP is the configured upstream MCP servers that { "global", "mcp" }
	// bindings name (nil: none); the Runner must be WithMCP over it.
	MCP *upstream.Pool
	// MaxUnsent, when > 0, bounds the bytes of output queued for the client
	// and not yet written: messages are queued and written by a goroutine
	// of their own, so no run waits on the client, and once the client
	// falls behind the bound the output is dropped and FellBehind is called
	// (service mode closes the connection with it: docs/service.md §4).
	// 0: each message is written by its sender (stdio). Unsent, when set,
	// is a bound the connection shares with others (NewUnsentBudget).
	MaxUnsent  int64
	Unsent     *UnsentBudget
	FellBehind func()
}

// Daemon is what initialize tells the client about the daemon (docs/protocol.md §2).
// Limits are also the configured budgets a run's own limits may only
// tighten (docs/configuration.md §4).
type Daemon struct {
	Limits            protocol.Limits // every field set
	GraceMs           int64
	MaxConcurrentRuns int
	Isolation         string   // the tier: "process" or "sandbox"
	IsolationReason   string   // why that tier: the setting, or what auto found
	Python            string   // the frozen interpreter every child runs
	PythonVersion     string   // "<maj>.<min>.<micro>"
	Preload           []string // the fork server's preloaded modules ("?" marks stripped)
	// Persistent sessions (docs/protocol-sessions.md §11): the cap (0: none), the
	// longest idle time, and whether session/fork is served.
	MaxSessions   int
	SessionIdleMs int64
	SessionFork   bool
	// Packages is the allow-list of packages on demand (docs/packages.md);
	// its zero value refuses every request for packages.
	Packages wheelset.AllowList
	// Egress is the daemon's egress policy (nil: no egress proxy, and a
	// run's "egress" member is refused); a run may only narrow it.
	Egress *egress.Policy
}

// Server is one JSON-RPC connection.
type Server struct {
	opts Options
	log  *slog.Logger
	in   *frameReader
	w    *writer

	mu      sync.Mutex
	state   state
	runs    map[string]*runEntry // cancel registry, keyed by the run's id text
	pending map[string]bool      // request ids not yet answered
	calls   map[uint64]*call     // outstanding binding/call requests
	callSeq atomic.Uint64

	pendingShutdown bool          // a shutdown request was accepted
	shutdownReplied chan struct{} // closed once the shutdown response is written
	teardownOnce    sync.Once
}

// New creates a server; Serve runs it.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		opts:            opts,
		log:             log,
		in:              newFrameReader(opts.In),
		w:               newWriter(opts.Out, log, opts.MaxUnsent, opts.Unsent, opts.FellBehind),
		runs:            map[string]*runEntry{},
		pending:         map[string]bool{},
		calls:           map[uint64]*call{},
		shutdownReplied: make(chan struct{}),
	}
}

// Serve reads and handles messages until the client goes away, sends exit,
// the stream becomes unusable, or ctx is cancelled (SIGTERM/SIGINT). Every
// path tears down (every run aborted, every child gone) before returning
// the process exit code (docs/protocol.md §2).
func (s *Server) Serve(ctx context.Context) int {
	done := make(chan int, 1)
	go func() { done <- s.readLoop() }()
	defer s.w.finish()
	select {
	case code := <-done:
		return code
	case <-ctx.Done():
		s.log.Info("signal received: tearing down")
		s.w.drain()
		s.teardown()
		return 0
	}
}

func (s *Server) readLoop() (code int) {
	defer func() {
		if p := recover(); p != nil { // Appendix B item 14: never crash on input
			s.log.Error("panic in the read loop", "panic", p)
			s.teardown()
			code = 1
		}
	}()
	for {
		body, err := s.in.next()
		var hf *headerFault
		var big *oversize
		switch {
		case err == nil:
			if code, exit := s.handle(body); exit {
				return code
			}
		case errors.As(err, &big):
			s.w.replyError(nil, protocol.CodeInvalidRequest, big.Error())
		case errors.As(err, &hf):
			s.log.Error("unusable header block; closing", "fault", hf.msg)
			s.w.replyError(nil, protocol.CodeParseError, "unusable header block: "+hf.msg)
			s.w.drain()
			s.teardown()
			return 1
		default:
			if !errors.Is(err, io.EOF) {
				s.log.Warn("reading stdin failed", "err", err)
			}
			s.log.Info("stdin closed: tearing down")
			s.w.drain()
			s.teardown()
			s.awaitShutdownReply()
			return 0
		}
	}
}

// teardown aborts every run and waits until every child is gone; it runs
// once, and later callers wait for the first.
func (s *Server) teardown() {
	s.teardownOnce.Do(func() {
		s.mu.Lock()
		if s.state != stateShuttingDown {
			s.state = stateShuttingDown
		}
		s.mu.Unlock()
		if s.opts.Runner != nil {
			s.opts.Runner.Shutdown()
		}
	})
}

// awaitShutdownReply waits for an in-progress shutdown's response.
func (s *Server) awaitShutdownReply() {
	s.mu.Lock()
	sent := s.pendingShutdown
	s.mu.Unlock()
	if sent {
		<-s.shutdownReplied
	}
}
