package coderun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// ErrConnectionLost is wrapped by every error of a request the daemon can no
// longer answer: it exited, closed the connection, or Close was called.
var ErrConnectionLost = errors.New("coderun: connection to the daemon lost")

// Options configure Start and Connect.
type Options struct {
	// Command is the daemon's argv (Start only). Empty: $CODERUN_RPC_BIN,
	// else coderun-rpc on PATH (see FindDaemon).
	Command []string
	// Env is appended to os.Environ() for the daemon (Start only), e.g.
	// "CODERUN_MAX_CONCURRENT_RUNS=4"; a later entry wins.
	Env []string
	// Stderr receives the daemon's log (Start only). Nil: the client keeps
	// the last 8 KiB and quotes it in the error when the daemon is lost.
	Stderr io.Writer
	// Token is the daemon's CODERUN_AUTH_TOKEN (Connect only).
	Token string
	// ClientName is initialize's clientInfo.name, for the daemon's log
	// (default "coderun-go").
	ClientName string
	// OnSessionClosed, when set, is told of each session the daemon ended
	// by itself (idle, lost, shutdown). It runs on the read goroutine.
	OnSessionClosed func(SessionClosed)
}

// SessionClosed is a session/closed notification (docs/protocol.md §11.3).
type SessionClosed struct {
	SessionID string `json:"sessionId"`
	Reason    string `json:"reason"` // "idle", "lost" or "shutdown"
	Message   string `json:"message"`
}

// ServerInfo is the result of initialize (docs/protocol.md §2.6).
type ServerInfo struct {
	ServerInfo struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
	// Capabilities is kept as the daemon sent it; see Capabilities.
	Capabilities json.RawMessage `json:"capabilities"`
}

// Client is one connection to a daemon. Create it with Start or Connect and
// end it with Close.
type Client struct {
	conn   *jsonrpc2.Conn
	stream *exactStream
	ids    atomic.Uint64
	opts   Options
	daemon *daemon // nil for Connect and Attach
	// ends: the conversation is the daemon's whole life (Start, Attach), so
	// Close sends shutdown and exit; else (Connect) Close only disconnects.
	ends bool
	// closing is set by Close: a connection ended by the client is not a
	// daemon that exited.
	closing   atomic.Bool
	closeOnce sync.Once
	closeErr  error
	info      ServerInfo
	// grace is the daemon's capabilities.limits.graceMs, bounded: how long
	// a cancelled program may take to end before the daemon kills it.
	grace time.Duration

	// connCtx ends with the connection; binding calls run under it.
	connCtx context.Context

	mu    sync.Mutex
	runs  map[jsonrpc2.ID]*runState          // live runs, by request id
	calls map[jsonrpc2.ID]context.CancelFunc // binding calls being served, by the daemon's request id
}

// Info is the daemon's answer to initialize.
func (c *Client) Info() ServerInfo { return c.info }

// newClient wraps stream in a jsonrpc2 connection and performs initialize
// and initialized.
func newClient(ctx context.Context, stream jsonrpc2.ObjectStream, opts Options, d *daemon, ends bool) (*Client, error) {
	c := connect(stream, opts, d, ends)
	name := opts.ClientName
	if name == "" {
		name = "coderun-go"
	}
	params := map[string]any{"clientInfo": map[string]string{"name": name}}
	if err := c.call(ctx, protocol.MethodInitialize, params, &c.info); err != nil {
		c.shut()
		return nil, err
	}
	c.grace = graceOf(c.info.Capabilities)
	if err := c.conn.Notify(ctx, protocol.MethodInitialized, map[string]any{}); err != nil {
		c.shut()
		return nil, c.lost(err)
	}
	return c, nil
}

// connect wraps stream in a jsonrpc2 connection served by the client's
// handler; connCtx ends when the connection does.
func connect(stream jsonrpc2.ObjectStream, opts Options, d *daemon, ends bool) *Client {
	c := &Client{opts: opts, daemon: d, ends: ends, runs: map[jsonrpc2.ID]*runState{}, calls: map[jsonrpc2.ID]context.CancelFunc{}}
	var connEnded context.CancelFunc
	c.connCtx, connEnded = context.WithCancel(context.Background())
	c.stream = &exactStream{ObjectStream: stream}
	c.conn = jsonrpc2.NewConn(context.Background(), c.stream, handler{c},
		jsonrpc2.SetLogger(log.New(io.Discard, "", 0)))
	go func() {
		<-c.conn.DisconnectNotify()
		connEnded()
	}()
	return c
}

// maxGrace bounds the grace a daemon advertises (the client waits that long
// for a cancelled run's answer).
const maxGrace = time.Minute

// graceOf reads capabilities.limits.graceMs, clamped to [0, maxGrace].
func graceOf(capabilities json.RawMessage) time.Duration {
	var c struct {
		Limits struct {
			GraceMs float64 `json:"graceMs"`
		} `json:"limits"`
	}
	_ = json.Unmarshal(capabilities, &c)
	return time.Duration(min(max(c.Limits.GraceMs, 0), float64(maxGrace/time.Millisecond))) * time.Millisecond
}

// nextID is a fresh request id. Every request names its id (PickID), so the
// client knows a run's id before the daemon's first binding/call for it.
func (c *Client) nextID() jsonrpc2.ID { return jsonrpc2.ID{Num: c.ids.Add(1)} }

// call sends one request and decodes its result into result. A refusal is
// the daemon's *jsonrpc2.Error; ctx ending abandons the wait (the request
// stays sent).
func (c *Client) call(ctx context.Context, method string, params, result any) error {
	err := c.conn.Call(ctx, method, params, result, jsonrpc2.PickID(c.nextID()))
	return c.lost(err)
}

// lost turns the library's ErrClosed into ErrConnectionLost with the
// daemon's refusal, or else the tail of its log, and leaves every other
// error as it is.
func (c *Client) lost(err error) error {
	if !errors.Is(err, jsonrpc2.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
		return err
	}
	if refusal := c.stream.refusal.Load(); refusal != nil {
		return fmt.Errorf("%w: the daemon refused the connection: %s", ErrConnectionLost, *refusal)
	}
	if c.daemon != nil && !c.closing.Load() {
		<-c.daemon.exited // the daemon's output ended: it is exiting
		if why := c.daemon.exitNote(); why != "" {
			return fmt.Errorf("%w: %s", ErrConnectionLost, why)
		}
	}
	return ErrConnectionLost
}

// Close ends the connection. For Start and Attach it sends shutdown (the
// daemon ends every run and session and answers once every child is gone)
// and exit, then closes the connection and, for Start, waits for the
// process. For Connect it closes the connection, which ends this
// connection's runs and sessions, not the daemon. A second Close returns
// the first one's error.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Client) close() error {
	c.closing.Store(true)
	if !c.ends {
		c.shut()
		return nil
	}
	err := c.call(context.Background(), protocol.MethodShutdown, nil, nil)
	if err == nil {
		err = c.lost(c.conn.Notify(context.Background(), protocol.MethodExit, nil))
	}
	c.shut()
	if c.daemon == nil {
		return err
	}
	if werr := c.daemon.wait(); err == nil {
		err = werr
	}
	return err
}

// shut closes the connection and, for a started daemon, its input.
func (c *Client) shut() {
	_ = c.conn.Close()
	if c.daemon != nil {
		c.daemon.closeInput()
	}
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.conn.DisconnectNotify() }
