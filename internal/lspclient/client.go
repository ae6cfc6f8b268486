// Package lspclient is the hand-written JSON-RPC 2.0 test client with LSP
// framing (Content-Length headers), the client side of the daemon's stdio
// protocol. The end-to-end tests and the benchmark drive the daemon through
// it, because they write malformed frames and time arrivals, which the
// public client (clients/go, on a JSON-RPC library) does not let them do; it
// imports nothing of the daemon.
//
// It owns the framing both ways, request ids, the dispatch of what the peer
// sends (responses by id, requests and notifications to handlers) and the
// failure of every waiter when the stream ends. It trusts its peer enough to
// decode messages with encoding/json, but keeps each body exactly as read
// (Message.Raw) with the time it was read (Message.At), and writes raw bytes
// when asked, because tests send malformed input and assert exact output.
//
// Concurrency: one goroutine, started by New, reads; it calls the handlers
// one at a time in arrival order. Every method is safe for concurrent use;
// writes are serialized so a frame is never interleaved with another.
//
// End: reading stops at the end of the stream (io.EOF) or at a malformed
// message. Then every pending Wait or Call fails with ErrClosed, and so does
// every later one, except for responses already read. The read goroutine
// lives until its reader ends: whoever owns the peer ends it by closing it.
package lspclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxBody bounds a body the client reads when Options.MaxBody is 0.
// The daemon's own caps apply to what it reads, not to what it writes: a run
// result carrying a large log ledger, escaped, is tens of MiB.
const DefaultMaxBody = 256 << 20

var (
	// ErrClosed is returned to every waiter once the read loop has ended.
	ErrClosed = errors.New("lspclient: connection closed")
	// ErrMalformed marks a frame or body the peer should never have written:
	// a broken header, a body over the bound, a body that is not a JSON-RPC
	// message. Reading stops there.
	ErrMalformed = errors.New("lspclient: malformed message")
)

// Message is one message read from the peer.
type Message struct {
	ID     json.RawMessage `json:"id,omitempty"` // as written ("null" for a null id); nil when absent
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`

	Raw []byte    `json:"-"` // the body exactly as read
	At  time.Time `json:"-"` // when the body's last byte was read, before decoding
}

// Error is a response's error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Options configure a Client. The handlers run on the read goroutine, one at
// a time, in arrival order: a handler that blocks stops the client reading.
type Options struct {
	// OnMessage, if set, sees every message before it is dispatched.
	OnMessage func(m *Message)
	// OnRequest receives each request of the peer (a method and an id). It
	// answers through reply, now or later from another goroutine, or never.
	// Without it, requests are answered with -32601.
	OnRequest func(m *Message, reply Reply)
	// OnNotification receives each notification (a method, no id).
	OnNotification func(m *Message)
	// FirstID is the id of the first request sent with Request (default 1).
	FirstID int64
	// MaxBody bounds the body of a frame read (default DefaultMaxBody).
	MaxBody int
}

// Client is one side of a JSON-RPC connection: it writes to w and, from a
// goroutine of its own, reads r until the end of the stream or a malformed
// message.
type Client struct {
	w    io.Writer
	wmu  sync.Mutex
	opts Options
	ids  atomic.Int64

	mu        sync.Mutex
	waiting   map[string]chan *Message // by id text, one waiter per id
	unclaimed map[string]*Message      // responses read before anyone waited for them
	closed    bool

	done chan struct{}
	err  error // why reading stopped; set before done is closed
}

// New starts reading r and returns the client that writes to w. The client
// never closes w; the caller ends the conversation by closing it.
func New(w io.Writer, r io.Reader, opts Options) *Client {
	if opts.MaxBody == 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.FirstID == 0 {
		opts.FirstID = 1
	}
	c := &Client{w: w, opts: opts, waiting: map[string]chan *Message{}, unclaimed: map[string]*Message{},
		done: make(chan struct{})}
	c.ids.Store(opts.FirstID - 1)
	go c.readLoop(bufio.NewReaderSize(r, 64<<10))
	return c
}

// Done is closed when the read loop has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the read loop ended (io.EOF at a clean end of the stream, an
// error wrapping ErrMalformed for a message the peer should not have sent);
// nil while it runs.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// WriteRaw writes b as it is, in one write: tests use it for hostile frames.
func (c *Client) WriteRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(b)
	return err
}

// Send frames body (written as it is, valid or not) and writes it.
func (c *Client) Send(body []byte) error { return c.WriteRaw(Frame(body)) }

// Request sends a request with the next id and returns the id's text, for
// Wait. params is written as it is; empty leaves it out.
func (c *Client) Request(method string, params json.RawMessage) (string, error) {
	id := strconv.FormatInt(c.ids.Add(1), 10)
	return id, c.Send(Body(id, method, params))
}

// Notify sends a notification; params as for Request.
func (c *Client) Notify(method string, params json.RawMessage) error {
	return c.Send(Body("", method, params))
}

// Call is Request then Wait. An error response is a Message with Error set,
// not an error: err reports only the connection and ctx.
func (c *Client) Call(ctx context.Context, method string, params json.RawMessage) (*Message, error) {
	id, err := c.Request(method, params)
	if err != nil {
		return nil, err
	}
	return c.Wait(ctx, id)
}

// Body is the body of a request with id written as it is, or of a
// notification when id is "". params is written as it is; empty leaves it
// out. Tests build bodies with it to send raw, in a batch or out of order.
func Body(id, method string, params json.RawMessage) []byte {
	b := []byte(`{"jsonrpc":"2.0",`)
	if id != "" {
		b = append(append(append(b, `"id":`...), id...), ',')
	}
	name, _ := json.Marshal(method)
	b = append(append(b, `"method":`...), name...)
	if len(params) > 0 {
		b = append(append(b, `,"params":`...), params...)
	}
	return append(b, '}')
}
