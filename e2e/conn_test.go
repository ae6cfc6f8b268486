package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	coderun "github.com/coderun-rpc/coderun-rpc/clients/go"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// rpcConn is the tests' end of one JSON-RPC connection to the daemon, at the
// message level: the tests write requests, answers and malformed frames as
// raw bytes (frame), and read through the Go client's bounded frame stream
// (coderun.NewObjectStream), keeping every body exactly as it arrived.
//
// One goroutine, started by newConn, reads: it hands each message to
// onMessage, then a request to onRequest, a notification to onNote and a
// response to its waiter (or keeps it for a later wait). Writes are
// serialized so a frame is never interleaved with another. When reading
// ends (the end of the stream, or a frame or body the daemon should not
// have written) every waiter fails with errClosed.
type rpcConn struct {
	w   io.Writer
	wmu sync.Mutex
	ids atomic.Int64

	onMessage, onRequest, onNote func(*msg) // each optional; on the read goroutine

	mu        sync.Mutex
	waiting   map[string]chan *msg // by id text, one waiter per id
	unclaimed map[string]*msg      // responses read before anyone waited for them
	closed    bool

	done chan struct{}
	err  error // why reading stopped; set before waiters are released and done is closed
}

// errClosed is returned to every waiter once the connection's reading has ended.
var errClosed = errors.New("e2e: connection closed")

// errMalformed marks a body that is not a JSON-RPC message.
var errMalformed = errors.New("e2e: malformed message")

// rpcError is a response's error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// newConn is a connection writing to w whose requests get ids from firstID
// up; start begins its reading, once its handlers are set.
func newConn(w io.Writer, firstID int64) *rpcConn {
	c := &rpcConn{w: w, waiting: map[string]chan *msg{}, unclaimed: map[string]*msg{}, done: make(chan struct{})}
	c.ids.Store(firstID - 1)
	return c
}

func (c *rpcConn) start(r io.Reader) *rpcConn {
	go c.read(coderun.NewObjectStream(readOnly{r}))
	return c
}

// readOnly is a reader as the ReadWriteCloser NewObjectStream takes; the
// rpcConn writes through its own frame writer.
type readOnly struct{ io.Reader }

func (readOnly) Write(b []byte) (int, error) { return 0, errors.New("e2e: the stream is read-only") }
func (readOnly) Close() error                { return nil }

func (c *rpcConn) read(stream interface{ ReadObject(any) error }) {
	var err error
	for err == nil {
		var body json.RawMessage
		if err = stream.ReadObject(&body); err == nil {
			m := &msg{raw: body}
			if jerr := json.Unmarshal(body, m); jerr != nil {
				err = fmt.Errorf("%w: %v in %q", errMalformed, jerr, body)
				break
			}
			c.dispatch(m)
		}
	}
	c.mu.Lock()
	c.err = err // before any waiter's channel closes: a waiter reads it then
	c.closed = true
	for id, ch := range c.waiting {
		close(ch)
		delete(c.waiting, id)
	}
	c.mu.Unlock()
	close(c.done)
}

func (c *rpcConn) dispatch(m *msg) {
	if c.onMessage != nil {
		c.onMessage(m)
	}
	switch {
	case m.Method != "" && m.ID != nil:
		if c.onRequest != nil {
			c.onRequest(m)
		}
	case m.Method != "":
		if c.onNote != nil {
			c.onNote(m)
		}
	default:
		c.deliver(m)
	}
}

// deliver hands a response to its waiter, or keeps it for a later wait (a
// second response with the same id replaces the first).
func (c *rpcConn) deliver(m *msg) {
	id := string(m.ID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.waiting[id]; ok {
		delete(c.waiting, id)
		ch <- m
		return
	}
	c.unclaimed[id] = m
}

// Done is closed when reading has ended.
func (c *rpcConn) Done() <-chan struct{} { return c.done }

// Err is why reading ended (io.EOF at a clean end); nil while it reads.
func (c *rpcConn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// WriteRaw writes b as it is, in one write.
func (c *rpcConn) WriteRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(b)
	return err
}

// Send frames body (valid or not) and writes it.
func (c *rpcConn) Send(body []byte) error { return c.WriteRaw(frame(string(body))) }

// Request sends a request with the next id and returns the id's text.
// params is written as it is; empty leaves it out.
func (c *rpcConn) Request(method string, params json.RawMessage) (string, error) {
	id := strconv.FormatInt(c.ids.Add(1), 10)
	return id, c.Send(rawBody(id, method, params))
}

// Notify sends a notification; params as for Request.
func (c *rpcConn) Notify(method string, params json.RawMessage) error {
	return c.Send(rawBody("", method, params))
}

// Call is Request then Wait; an error response is a msg with Error set.
func (c *rpcConn) Call(ctx context.Context, method string, params json.RawMessage) (*msg, error) {
	id, err := c.Request(method, params)
	if err != nil {
		return nil, err
	}
	return c.Wait(ctx, id)
}

// Wait returns the response whose id is written as id (`7`, `"x"`, `null`),
// whether it arrived before the call or arrives during it; it fails with
// ctx's error, or errClosed once reading has ended without it.
func (c *rpcConn) Wait(ctx context.Context, id string) (*msg, error) {
	c.mu.Lock()
	if m, ok := c.unclaimed[id]; ok {
		delete(c.unclaimed, id)
		c.mu.Unlock()
		return m, nil
	}
	if c.closed {
		c.mu.Unlock()
		<-c.done
		return nil, fmt.Errorf("%w: %w", errClosed, c.err)
	}
	ch := make(chan *msg, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%w: %w", errClosed, c.err)
		}
		return m, nil
	case <-ctx.Done():
		c.mu.Lock()
		if c.waiting[id] == ch {
			delete(c.waiting, id)
		}
		c.mu.Unlock()
		select { // delivered between ctx's end and the withdrawal
		case m, ok := <-ch:
			if ok {
				return m, nil
			}
		default:
		}
		return nil, ctx.Err()
	}
}

// Unclaimed counts the responses read that no Wait has taken.
func (c *rpcConn) Unclaimed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.unclaimed)
}

// reply answers request m with a raw tail (`"result":…` or `"error":…`).
func (c *rpcConn) reply(m *msg, tail string) error {
	return c.Send([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,` + tail + `}`))
}

// frame is body (as it is, valid or not) after its LSP header, for one write.
func frame(body string) []byte {
	return []byte("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// rawBody is the body of a request with id written as it is, or of a
// notification when id is "". params is written as it is; empty leaves it
// out.
func rawBody(id, method string, params json.RawMessage) []byte {
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

// TestConnWaitEnds: the harness's own wait: a response that never comes
// fails the wait at its context's end (it hung there), one that came first
// is taken, and the end of the stream fails later waits with errClosed.
func TestConnWaitEnds(t *testing.T) {
	leakcheck.Check(t)
	fromDaemon, toClient := io.Pipe()
	c := newConn(io.Discard, 1).start(fromDaemon)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Wait(ctx, "1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait for a response that never comes: %v", err)
	}
	if _, err := toClient.Write(frame(`{"jsonrpc":"2.0","id":2,"result":7}`)); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Wait(context.Background(), "2"); err != nil || string(m.Result) != "7" {
		t.Fatalf("%v %v", m, err)
	}
	toClient.Close()
	if _, err := c.Wait(context.Background(), "3"); !errors.Is(err, errClosed) {
		t.Fatalf("wait after the end: %v", err)
	}
}
