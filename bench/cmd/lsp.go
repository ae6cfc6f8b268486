package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/textproto"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// lspConn is a minimal JSON-RPC 2.0 peer over LSP framing: just enough to
// drive the daemon (or the echo floor) from the benchmark. The benchmark
// trusts its peer, so encoding/json is fine here.
type lspConn struct {
	w       io.Writer
	r       *bufio.Reader
	wmu     sync.Mutex
	nextID  atomic.Int64
	mu      sync.Mutex
	pending map[int64]chan reply
	// onCall answers a server → client request (binding/call).
	onCall func(params json.RawMessage) any
	done   chan struct{}
	err    error
}

// reply is a response's result (or error) and when its last byte was read,
// before the client decoded it.
type reply struct {
	raw json.RawMessage
	at  time.Time
}

type message struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      *json.RawMessage `json:"id,omitempty"`
	Method  string           `json:"method,omitempty"`
	Params  json.RawMessage  `json:"params,omitempty"`
	Result  json.RawMessage  `json:"result,omitempty"`
	Error   json.RawMessage  `json:"error,omitempty"`
}

func newLSPConn(w io.Writer, r io.Reader, onCall func(json.RawMessage) any) *lspConn {
	c := &lspConn{w: w, r: bufio.NewReaderSize(r, 1<<16), pending: map[int64]chan reply{},
		onCall: onCall, done: make(chan struct{})}
	go c.readLoop()
	return c
}

// writeFrame writes header and body in one write.
func writeFrame(w io.Writer, body []byte) error {
	frame := fmt.Appendf(nil, "Content-Length: %d\r\n\r\n", len(body))
	_, err := w.Write(append(frame, body...))
	return err
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	tp := textproto.NewReader(r)
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(hdr.Get("Content-Length")))
	if err != nil {
		return nil, fmt.Errorf("bad Content-Length: %w", err)
	}
	body := make([]byte, n)
	_, err = io.ReadFull(r, body)
	return body, err
}

func (c *lspConn) send(v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return writeFrame(c.w, body)
}

// call sends a request and waits for its result (an error response is
// returned as an error).
func (c *lspConn) call(method string, params any) (json.RawMessage, error) {
	r, err := c.callTimed(method, params)
	return r.raw, err
}

// callTimed is call, also returning when the response had arrived.
func (c *lspConn) callTimed(method string, params any) (reply, error) {
	id := c.nextID.Add(1)
	ch := make(chan reply, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		return reply{}, err
	}
	select {
	case res := <-ch:
		return res, nil
	case <-c.done:
		return reply{}, fmt.Errorf("connection closed: %v", c.err)
	}
}

func (c *lspConn) notify(method string, params any) error {
	return c.send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

func (c *lspConn) readLoop() {
	defer close(c.done)
	for {
		body, err := readFrame(c.r)
		if err != nil {
			c.err = err
			return
		}
		at := time.Now()
		var m message
		if err := json.Unmarshal(body, &m); err != nil {
			c.err = err
			return
		}
		c.dispatch(m, at)
	}
}

func (c *lspConn) dispatch(m message, at time.Time) {
	switch {
	case m.Method != "" && m.ID != nil:
		result := c.onCall(m.Params)
		_ = c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
	case m.Method != "":
		// notifications (run/log, $/cancelRequest) are not measured
	case m.ID != nil:
		id, _ := strconv.ParseInt(string(*m.ID), 10, 64)
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			if len(m.Error) > 0 {
				ch <- reply{m.Error, at}
			} else {
				ch <- reply{m.Result, at}
			}
		}
	}
}

// startPeer starts cmd with its stdio wired to a new lspConn.
func startPeer(cmd *exec.Cmd, onCall func(json.RawMessage) any) (*lspConn, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return newLSPConn(in, out, onCall), nil
}
