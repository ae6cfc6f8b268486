// Package serve is service mode: `coderun-rpc serve --listen ADDR [--admin
// ADDR]` (docs/service.md). It owns the listener (unix:, tcp: or ws://) and
// its door (door.go: the descriptor bound, the cap on connections not yet
// authenticated, the loopback-only Host of a token-less WebSocket),
// bearer-token authentication, the connection cap, each connection served
// (by the JSON-RPC server main injects: Options.ServeConn) on a
// session.Lane of the one shared session.Manager (so a
// closed connection ends its own runs and sessions only, a connection names
// only the sessions it opened, and run slots are shared fairly between
// connections), the bound on a connection's unsent output and the per-write
// stall bound, which close a connection whose client stopped reading, the
// admin endpoint (/healthz, /readyz, /metrics) and the drain on SIGTERM,
// which ends within its time whatever the clients do.
//
// Each connection speaks exactly the stdio protocol. Streams (unix, tcp)
// carry it in LSP framing, read and written by the injected server itself
// (package rpc, which serve does not import: the front ends are siblings).
// On WebSocket each text message is one JSON-RPC message (ws.go): the
// adapter adds and strips the Content-Length framing around the server, so
// it stays the one reader and encoder. The issue named sourcegraph/jsonrpc2's WebSocket
// stream; the daemon does not use jsonrpc2 at all (docs/child-protocol.md
// Appendix B item 5), so the WebSocket layer is github.com/gorilla/websocket
// under that small adapter instead.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/tracing"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// Options configure service mode; main builds them from the configuration.
type Options struct {
	Listen Addr
	Admin  Addr // the admin endpoint (ParseAdminAddr); the zero Addr for none
	// Token is the bearer token every connection must present; "" for
	// none, allowed only when Listen is loopback.
	Token                string
	MaxConnections       int
	MaxRunsPerConnection int           // 0: no cap of its own
	Drain                time.Duration // how long SIGTERM's drain lasts at most
	// WriteStall bounds how long one write to a client may make no
	// progress before the connection is closed.
	WriteStall time.Duration
	// MaxUnauthenticated caps stream connections accepted and not yet
	// authenticated; with MaxConnections it bounds the listener's
	// connections (ws: before the upgrade too). AuthTimeout is how long one
	// may take to present its token (ws: its upgrade request's headers).
	MaxUnauthenticated int
	AuthTimeout        time.Duration
	Manager            *session.Manager
	Tracer             *tracing.Tracer // nil: no spans (traceparents still passed on)
	// RunSlots is how many runs and sessions the Manager holds at once,
	// each of which takes descriptors (door.go).
	RunSlots int
	// ServeConn serves one admitted connection with the JSON-RPC server
	// (main injects package rpc's, which bounds the connection's unsent
	// output and calls c.FellBehind past the bound) until c.In ends, and
	// returns its exit code.
	ServeConn func(c Conn) int
	// Unsent is every connection's output queued and not yet taken by its
	// client, for the coderun_unsent_bytes gauge.
	Unsent func() int64
	Logger *slog.Logger
}

// Conn is one admitted connection as ServeConn serves it.
type Conn struct {
	In  io.Reader // ends (io.EOF) when the client goes or the service ends the connection
	Out io.Writer
	Log *slog.Logger
	// FellBehind ends the connection: its client stopped taking output.
	FellBehind func()
	// Runner and Sessions are the connection's lane of the shared Manager.
	Runner   wire.Runner
	Sessions wire.Sessions
}

// service is one running serve.
type service struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics

	draining atomic.Bool
	connSeq  atomic.Uint64
	live     atomic.Int64 // connections being served
	pending  atomic.Int64 // connections not yet authenticated (ws: not yet upgraded)

	mu    sync.Mutex
	conns map[uint64]endingReader // the input of each connection served
	wg    sync.WaitGroup          // connection handlers
}

// Run serves until ctx is cancelled (SIGTERM, SIGINT), then drains: it
// stops accepting, refuses new runs, lets running ones finish within
// Drain, ends every connection (aborting what is left), shuts the Manager
// down and returns the exit code: 0; 1 when a listener cannot start; 2 for
// a listener off loopback without a token. The Manager is shut down on
// every path.
func Run(ctx context.Context, opts Options) int {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Token == "" && !opts.Listen.Loopback() {
		opts.Manager.Shutdown()
		log.Error("a listener off loopback needs CODERUN_AUTH_TOKEN", "listen", opts.Listen.String())
		return 2
	}
	if err := checkDescriptors(opts); err != nil {
		opts.Manager.Shutdown()
		log.Error("not enough file descriptors", "err", err)
		return 2
	}
	s := &service{opts: opts, log: log, conns: map[uint64]endingReader{}}
	s.metrics = newMetrics(s)
	stop, err := s.start()
	if err != nil {
		opts.Manager.Shutdown()
		log.Error("cannot listen", "err", err)
		return 1
	}
	<-ctx.Done()
	stop()
	return 0
}

// start opens the listener and the admin endpoint and serves them; stop
// drains (see drain) and closes both.
func (s *service) start() (stop func(), err error) {
	ln, err := s.listen()
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", s.opts.Listen.String(), err)
	}
	var admin *http.Server
	adminText := ""
	if s.opts.Admin.Scheme != "" {
		srv, addr, err := s.startAdmin()
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("--admin %s: %w", s.opts.Admin.String(), err)
		}
		admin, adminText = srv, addr.String()
	}
	stopAccepting := s.accept(ln)
	s.log.Info("serving", "listen", ln.Addr().String(), "admin", adminText)
	return func() {
		s.drain(stopAccepting)
		if admin != nil {
			_ = admin.Close()
		}
	}, nil
}

// listen opens the listener; a unix socket file is removed when it closes.
// It holds at most MaxConnections + MaxUnauthenticated connections open at
// once, served, authenticating or being refused: past that, connections
// wait in the kernel's backlog (checkDescriptors).
func (s *service) listen() (net.Listener, error) {
	ln, err := net.Listen(s.opts.Listen.network(), s.opts.Listen.Where)
	if err != nil {
		return nil, err
	}
	return netutil.LimitListener(ln, s.opts.MaxConnections+s.opts.MaxUnauthenticated), nil
}

// accept serves ln in the background; the returned function stops
// accepting and returns once the accept loop is gone.
func (s *service) accept(ln net.Listener) (stop func()) {
	if s.opts.Listen.Scheme == "ws" {
		srv := s.wsServer(ln.Addr())
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(ln) }()
		return func() {
			_ = srv.Close() // the listener; hijacked connections are ours
			<-done
		}
	}
	done, closed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var pause time.Duration
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil { // out of descriptors, say: wait, as net/http does, rather than spin
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "pauseMs", pause.Milliseconds())
				select {
				case <-closed:
					return
				case <-time.After(pause):
				}
				continue
			}
			pause = 0
			go s.serveStream(c)
		}
	}()
	return func() { close(closed); ln.Close(); <-done }
}

// drain is SIGTERM's: stop accepting, refuse new runs and sessions, wait
// for the runs under way, then end every connection, which aborts what is
// left, closes its sessions and answers them, and shut the Manager down.
// It lasts at most Drain whatever the clients do: the runs get Drain less
// the wrap-up (half of it, at most 1 s) to finish, the wrap-up is for
// aborting what is left and answering it, and a connection still open
// when Drain is up is closed, ending a write its client does not take (the
// write stall would hold it much longer).
func (s *service) drain(stopAccepting func()) {
	s.mu.Lock()
	s.draining.Store(true) // under mu: no connection is admitted after (admit)
	s.mu.Unlock()
	stopAccepting()
	s.log.Info("draining", "runs", s.opts.Manager.Load().Active, "drainMs", s.opts.Drain.Milliseconds())
	deadline := time.Now().Add(s.opts.Drain)
	wrapUp := min(s.opts.Drain/2, time.Second)
	for s.opts.Manager.Load().Active > 0 && time.Until(deadline) > wrapUp {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.opts.Manager.Load().Active; n > 0 {
		s.log.Warn("drain time is up: aborting the runs left", "runs", n)
	}
	s.eachConn(endingReader.end)
	force := time.AfterFunc(time.Until(deadline), func() { s.eachConn(endingReader.Close) })
	s.wg.Wait()
	force.Stop()
	s.opts.Manager.Shutdown()
}

// eachConn calls f on every connection served.
func (s *service) eachConn(f func(endingReader) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.conns {
		_ = f(in)
	}
}

// admit counts a new connection in (serveConn counts it out); false, and
// nothing counted, when the cap is reached or the service is draining.
func (s *service) admit() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		s.metrics.refused.WithLabelValues("draining").Inc()
		return 0, false
	}
	if s.live.Load() >= int64(s.opts.MaxConnections) {
		s.metrics.refused.WithLabelValues("max-connections").Inc()
		return 0, false
	}
	s.live.Add(1)
	s.wg.Add(1)
	s.metrics.accepted.Inc()
	return s.connSeq.Add(1), true
}

// release counts an admitted connection out.
func (s *service) release() {
	s.live.Add(-1)
	s.wg.Done()
}

func (s *service) tooMany() string {
	if s.draining.Load() {
		return protocol.MsgShuttingDown
	}
	return fmt.Sprintf("too many connections: this daemon serves at most %d at once", s.opts.MaxConnections)
}

// serveConn serves one admitted connection with ServeConn over in/out until
// the client goes away or the service ends it, then closes it. Either way
// the server sees the end of its input, exactly as a stdio daemon sees stdin's:
// it aborts the connection's runs (their lane), answers them and returns.
func (s *service) serveConn(id uint64, in endingReader, out writerOnly) {
	defer s.release()
	s.mu.Lock()
	s.conns[id] = in
	s.mu.Unlock()
	log := s.log.With("conn", id)
	log.Debug("connection opened")
	lr := &laneRunner{lane: s.opts.Manager.NewLane(s.opts.MaxRunsPerConnection, log), s: s}
	code := s.opts.ServeConn(Conn{In: in, Out: out, Log: log, Runner: lr, Sessions: lr, FellBehind: func() {
		s.metrics.closed.WithLabelValues("fell-behind").Inc()
		_ = in.end()
		_ = in.Close() // a write the client does not take ends now
	}})
	_ = in.Close()
	s.mu.Lock()
	delete(s.conns, id)
	s.mu.Unlock()
	log.Debug("connection closed", "code", code)
}

// endingReader is a connection's input: end makes a blocked or later
// Read return io.EOF; Close closes the connection.
type endingReader interface {
	Read([]byte) (int, error)
	Close() error
	end() error
}

type writerOnly interface{ Write([]byte) (int, error) }

// laneRunner is the Runner and Sessions of one connection: its lane of
// the shared Manager, which owns the sessions the connection opens (only
// it can name them; they close with it). New runs and sessions are refused
// while the service drains.
type laneRunner struct {
	lane *session.Lane
	s    *service
}

func (r *laneRunner) Submit(runID string, p protocol.RunParams, c session.Client, onResult func(protocol.Result)) (wire.Canceler, error) {
	if r.s.draining.Load() {
		return nil, session.ErrShuttingDown
	}
	c, onResult, refused := r.s.opts.Tracer.Start(runID, p, c, onResult)
	run, err := r.lane.Submit(runID, p, c, func(res protocol.Result) {
		r.s.metrics.observe(res)
		onResult(res)
	})
	if err != nil {
		refused(err)
		return nil, err // not a nil *Run in a non-nil Canceler
	}
	return run, nil
}

// Shutdown ends the connection's sessions and runs (the server's teardown: end of
// input, shutdown, exit, or the drain ending the connection).
func (r *laneRunner) Shutdown() { r.lane.Close(protocol.MsgShuttingDown) }

func (r *laneRunner) QueueFull() bool { return r.lane.Full() }

func (r *laneRunner) OpenSession(p protocol.SessionParams, onClosed func(id, reason, message string)) (string, error) {
	if r.s.draining.Load() {
		return "", session.ErrShuttingDown
	}
	return r.lane.OpenSession(p, onClosed)
}

func (r *laneRunner) ForkSession(id string, onClosed func(id, reason, message string)) func() (string, error) {
	if r.s.draining.Load() {
		return func() (string, error) { return "", session.ErrShuttingDown }
	}
	return r.lane.ForkSession(id, onClosed)
}

func (r *laneRunner) CloseSession(id string) (func(), error) { return r.lane.CloseSession(id) }
