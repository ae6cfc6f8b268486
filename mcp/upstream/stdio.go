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
	"strings"
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
// buffer of its own, up to its bound (lineConn.bound).
const readChunk = 64 << 10

// envelope is the room a message takes beyond the result it carries: the
// JSON-RPC members around it.
const envelope = readChunk

// lineTransport connects once to a started stdio server: lines are read from
// out until it ends, messages written to in (closing in ends the server).
// conn is the connection once Connect made it; no line longer than maxLine
// is held.
type lineTransport struct {
	out     io.Reader
	in      io.WriteCloser
	maxLine int64
	conn    *lineConn
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	t.conn = &lineConn{r: newReader(t.out), w: t.in, maxLine: t.maxLine, calls: map[string]waiting{}}
	return t.conn, nil
}

func newReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, readChunk) }

// lineConn is one connection: Read is called by the SDK's reader goroutine
// only; Write and the direct calls' methods (direct.go) may be called
// concurrently; Close ends the server, which ends a blocked Read with end of
// stream.
type lineConn struct {
	r       *bufio.Reader
	maxLine int64 // the longest line held

	mu sync.Mutex // serialises writes
	w  io.WriteCloser

	callMu sync.Mutex         // guards the direct calls (direct.go)
	calls  map[string]waiting // waiting direct calls by id
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
		var long *longLine
		if errors.As(err, &long) && long.call != "" {
			c.answer(long.call, nil, long.refusal)
			continue
		}
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

// longLine is a line read past, not held, because it outgrew its bound.
// When its first chunk names a waiting direct call, the call is refused with
// refusal and the connection serves on; any other such line breaks it.
type longLine struct {
	bound   int64
	call    string
	refusal error
}

func (e *longLine) Error() string {
	return fmt.Sprintf("a message from the server exceeds %d bytes", e.bound)
}

// line reads one line (without its newline) into memory of its own; a last
// line without a newline is a line too. A line longer than its bound is read
// to its end and dropped: a *longLine.
func (c *lineConn) line() ([]byte, error) {
	b, err := c.r.ReadSlice('\n')
	if err == nil {
		return bytes.Clone(b[:len(b)-1]), nil
	}
	long := bytes.Clone(b)
	var over *longLine
	if errors.Is(err, bufio.ErrBufferFull) {
		over = c.bound(long)
	}
	for errors.Is(err, bufio.ErrBufferFull) {
		if int64(len(long)) > over.bound {
			return nil, c.skip(over)
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

// bound is how much of a line starting with head may be held: a response to
// a waiting direct call may carry what the call's budget can still take
// (plus its envelope), one to a call no longer waiting nothing, anything
// else maxLine.
func (c *lineConn) bound(head []byte) *longLine {
	over := &longLine{bound: c.maxLine}
	id := leadingID(head)
	if !strings.HasPrefix(id, directIDPrefix) {
		return over
	}
	over.call, over.bound = id, envelope // a late answer: dropped anyway
	c.callMu.Lock()
	w, ok := c.calls[id]
	c.callMu.Unlock()
	if ok {
		over.refusal = w.b.refusal()
		over.bound = min(c.maxLine, w.b.room()+envelope)
	}
	return over
}

// skip reads past the rest of an overlong line (to its newline or the end
// of the stream) and returns over, or why reading failed.
func (c *lineConn) skip(over *longLine) error {
	for {
		_, err := c.r.ReadSlice('\n')
		switch {
		case err == nil || errors.Is(err, io.EOF):
			return over
		case !errors.Is(err, bufio.ErrBufferFull):
			return err
		}
	}
}

// leadingID is the string id of a JSON-RPC message whose first chunk is
// head, when that chunk holds it among the members before any it cannot
// read whole (a response's id comes before its result); "" otherwise.
func leadingID(head []byte) string {
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		if key == "id" {
			id, _ := dec.Token()
			s, _ := id.(string)
			return s
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
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
