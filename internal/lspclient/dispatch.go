package lspclient

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// readLoop reads and dispatches until the stream ends or a message is
// malformed, then fails every waiter.
func (c *Client) readLoop(r *bufio.Reader) {
	var err error
	for err == nil {
		var m *Message
		if m, err = readMessage(r, c.opts.MaxBody); err == nil {
			c.dispatch(m)
		}
	}
	c.mu.Lock()
	c.closed = true
	for id, ch := range c.waiting {
		close(ch)
		delete(c.waiting, id)
	}
	c.mu.Unlock()
	c.err = err
	close(c.done)
}

// readMessage reads one frame, stamps it and decodes it.
func readMessage(r *bufio.Reader, maxBody int) (*Message, error) {
	body, err := readFrame(r, maxBody)
	if err != nil {
		return nil, err
	}
	m := &Message{Raw: body, At: time.Now()}
	if err := json.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("%w: %v in %q", ErrMalformed, err, body)
	}
	return m, nil
}

func (c *Client) dispatch(m *Message) {
	if c.opts.OnMessage != nil {
		c.opts.OnMessage(m)
	}
	switch {
	case m.Method != "" && m.ID != nil:
		c.request(m)
	case m.Method != "":
		if c.opts.OnNotification != nil {
			c.opts.OnNotification(m)
		}
	default:
		c.deliver(m)
	}
}

func (c *Client) request(m *Message) {
	reply := Reply{c: c, id: m.ID}
	if c.opts.OnRequest == nil {
		_ = reply.Error(json.RawMessage(`{"code":-32601,"message":"method not found"}`))
		return
	}
	c.opts.OnRequest(m, reply)
}

// deliver hands a response to its waiter, or keeps it for a later Wait (a
// second response with the same id replaces the first).
func (c *Client) deliver(m *Message) {
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

// Wait returns the response whose id is written as id (e.g. `7`, `"x"`,
// `null`), whether it arrived before the call or arrives during it. It fails
// with ctx's error, or with ErrClosed once the read loop has ended without
// that response. One waiter per id: a second Wait for the same id replaces
// the first, which then waits for ctx.
func (c *Client) Wait(ctx context.Context, id string) (*Message, error) {
	c.mu.Lock()
	if m, ok := c.unclaimed[id]; ok {
		delete(c.unclaimed, id)
		c.mu.Unlock()
		return m, nil
	}
	if c.closed {
		c.mu.Unlock()
		return nil, c.closedError()
	}
	ch := make(chan *Message, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, c.closedError()
		}
		return m, nil
	case <-ctx.Done():
		return c.abandon(id, ch, ctx.Err())
	}
}

// abandon withdraws a waiter whose ctx ended, unless its response was
// delivered meanwhile.
func (c *Client) abandon(id string, ch chan *Message, err error) (*Message, error) {
	c.mu.Lock()
	if c.waiting[id] == ch {
		delete(c.waiting, id)
	}
	c.mu.Unlock()
	select {
	case m, ok := <-ch:
		if ok {
			return m, nil
		}
	default:
	}
	return nil, err
}

func (c *Client) closedError() error {
	<-c.done
	return fmt.Errorf("%w: %w", ErrClosed, c.err)
}

// Unclaimed counts the responses read that no Wait has taken.
func (c *Client) Unclaimed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.unclaimed)
}

// Reply answers one request of the peer. Its methods may be called from any
// goroutine; the client does not stop a second answer (tests send one on
// purpose).
type Reply struct {
	c  *Client
	id json.RawMessage
}

// Result answers with result, written as it is.
func (r Reply) Result(result json.RawMessage) error { return r.answer(`,"result":`, result) }

// Error answers with the error object e, written as it is.
func (r Reply) Error(e json.RawMessage) error { return r.answer(`,"error":`, e) }

func (r Reply) answer(member string, value json.RawMessage) error {
	b := append(append([]byte(`{"jsonrpc":"2.0","id":`), r.id...), member...)
	return r.c.Send(append(append(b, value...), '}'))
}
