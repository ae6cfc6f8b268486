package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/coderun-rpc/coderun-rpc/wireguard"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stdio connection to an upstream server: newline-delimited JSON-RPC
// messages (the MCP stdio transport), one per line. It replaces the SDK's
// IOTransport on the call path (docs/performance.md §12): that one decodes
// each message twice through a decoder that allocates a 32 KiB buffer per
// decode, on a reader goroutine of its own; this one reads on the SDK's
// reader goroutine and splits each line once with the wire guard's strict
// scanner. JSON-RPC batches are refused (MCP 2025-06-18 removed them).

// readChunk is the line reader's buffer: a longer line is gathered in a
// buffer of its own, up to maxLine.
const readChunk = 64 << 10

// errLineTooLong is a message from the server longer than maxLine bytes.
var errLineTooLong = fmt.Errorf("a message from the server exceeds %d bytes", maxLine)

// lineTransport connects once to a started stdio server: lines are read from
// out until it ends, messages written to in (closing in ends the server).
// conn is the connection once Connect made it.
type lineTransport struct {
	out  io.Reader
	in   io.WriteCloser
	conn *lineConn
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	t.conn = &lineConn{r: newReader(t.out), w: t.in, calls: map[string]replyFunc{}}
	return t.conn, nil
}

func newReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, readChunk) }

// lineConn is one connection: Read is called by the SDK's reader goroutine
// only; Write and the direct calls' methods (direct.go) may be called
// concurrently; Close ends the server, which ends a blocked Read with end of
// stream.
type lineConn struct {
	r *bufio.Reader

	mu sync.Mutex // serialises writes
	w  io.WriteCloser

	callMu sync.Mutex           // guards the direct calls (direct.go)
	calls  map[string]replyFunc // waiting direct calls by id
	lastID uint64
	ended  error // why Read stopped; nil while it reads
	// hasListed: the SDK has sent tools/list; meta is that request's "_meta".
	hasListed bool
	meta      json.RawMessage
}

func (c *lineConn) SessionID() string { return "" }

func (c *lineConn) Close() error { return c.w.Close() }

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.noteListing(msg)
	return c.writeLine(ctx, append(b, '\n'))
}

// writeLine writes one message, newline included, unless ctx has ended.
func (c *lineConn) writeLine(ctx context.Context, line []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.w.Write(line)
	return err
}

// Read returns the next message for the SDK; blank lines between messages are
// skipped, and so are the responses to direct calls, handed to their callers.
// When reading fails the direct calls fail with it.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.next(ctx)
	if err != nil {
		c.endCalls(err)
	}
	return msg, err
}

func (c *lineConn) next(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		line, err := c.line()
		if err != nil {
			return nil, err
		}
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		msg, err := decodeMessage(line)
		if err != nil {
			return nil, err
		}
		if r, ok := msg.(*jsonrpc.Response); ok && c.settle(r) {
			continue
		}
		return msg, nil
	}
}

// line reads one line (without its newline) into memory of its own; a last
// line without a newline is a line too.
func (c *lineConn) line() ([]byte, error) {
	b, err := c.r.ReadSlice('\n')
	if err == nil {
		return bytes.Clone(b[:len(b)-1]), nil
	}
	long := bytes.Clone(b)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(long) > maxLine {
			return nil, errLineTooLong
		}
		b, err = c.r.ReadSlice('\n')
		long = append(long, b...)
	}
	switch {
	case err == nil:
		return long[:len(long)-1], nil
	case errors.Is(err, io.EOF) && len(bytes.TrimSpace(long)) > 0:
		return long, nil
	}
	return nil, err
}

// decodeMessage is jsonrpc.DecodeMessage's contract on one strictly scanned
// object: version tag "2.0"; a "method" member makes a request, else it is a
// response, which needs an id. Params, result and error data alias line.
func decodeMessage(line []byte) (jsonrpc.Message, error) {
	ms, err := wireguard.Members(line, wireguard.Strict)
	if errors.Is(err, wireguard.ErrNotObject) && line[0] == '[' {
		return nil, errors.New("the server sent a JSON-RPC batch, which MCP no longer allows")
	}
	if err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if v, _ := wireguard.Last(ms, "jsonrpc"); string(v.Value) != `"2.0"` {
		return nil, fmt.Errorf("invalid message version tag %s; expected \"2.0\"", v.Value)
	}
	idm, _ := wireguard.Last(ms, "id")
	id, err := decodeID(idm.Value)
	if err != nil {
		return nil, err
	}
	if m, ok := wireguard.Last(ms, "method"); ok {
		method, ok := wireguard.DecodeString(m.Value)
		if !ok {
			return nil, errors.New("unmarshaling jsonrpc message: method is not a string")
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: value(ms, "params")}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("invalid request: a response without an id")
	}
	resp := &jsonrpc.Response{ID: id, Result: value(ms, "result")}
	if raw := value(ms, "error"); raw != nil && string(raw) != "null" {
		var e jsonrpc.Error
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc error: %w", err)
		}
		resp.Error = &e
	}
	return resp, nil
}

// value is the raw text of member name, nil when absent.
func value(ms []wireguard.Member, name string) json.RawMessage {
	if m, ok := wireguard.Last(ms, name); ok {
		return m.Value
	}
	return nil
}

// decodeID is jsonrpc.MakeID of the id's raw text (absent or null: no id).
func decodeID(raw []byte) (jsonrpc.ID, error) {
	switch wireguard.KindOf(raw) {
	case wireguard.KindString:
		s, _ := wireguard.DecodeString(raw)
		return jsonrpc.MakeID(s)
	case wireguard.KindNumber:
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return jsonrpc.ID{}, fmt.Errorf("invalid id %s: %w", raw, err)
		}
		return jsonrpc.MakeID(f)
	case wireguard.KindNone, wireguard.KindNull:
		return jsonrpc.MakeID(nil)
	}
	return jsonrpc.ID{}, fmt.Errorf("invalid id %s: not a string or a number", raw)
}
