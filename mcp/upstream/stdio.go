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
// IOTransport on the call path (bench/history-2026-12.md §12): that one decodes
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
	maxPage int64
	conn    *lineConn
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	t.conn = &lineConn{r: newReader(t.out), w: t.in, maxLine: t.maxLine, maxPage: t.maxPage, calls: map[string]waiting{}}
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
	// maxPage bounds a tools/list page: the SDK decodes a page's schemas
	// into maps many times its size, before any cap can drop a tool.
	maxPage int64

	mu sync.Mutex // serialises writes
	w  io.WriteCloser

	callMu sync.Mutex         // guards the direct calls (direct.go)
	calls  map[string]waiting // waiting direct calls by id
	lastID uint64
	ended  error // why Read stopped; nil while it reads
	// hasListed: the SDK has sent tools/list; meta is that request's "_meta"
	// and listID its id.
	hasListed bool
	meta      json.RawMessage
	listID    jsonrpc.ID
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
			long, _ := err.(*longLine)
			switch {
			case long != nil && long.call != "":
				c.answer(long.call, nil, long.refusal)
				continue
			case long != nil && long.page.IsValid():
				return &jsonrpc.Response{ID: long.page, Error: &jsonrpc.Error{Code: codePageTooLong, Message: long.Error()}}, nil
			}
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
// refusal; when it answers the SDK's tools/list (page), the SDK receives an
// error response of code codePageTooLong instead. The connection serves on
// in both cases; any other such line breaks it.
type longLine struct {
	bound   int64
	call    string
	refusal error
	page    jsonrpc.ID
}

// codePageTooLong is the error code of a tools/list page read past.
const codePageTooLong = -32001

// pageFactor × Caps.MaxStubBytes (plus the envelope) bounds a tools/list
// page: room for descriptions longer than the 16 KiB the stubs keep of them,
// while a page of schemas, which decoding makes tens of times larger, stays
// a few MiB.
const pageFactor = 8

func (e *longLine) Error() string {
	if e.page.IsValid() {
		return fmt.Sprintf("a tools/list page exceeds %d bytes (%d × %s + 64 KiB)", e.bound, pageFactor, varMaxStubBytes)
	}
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
// (plus its envelope), one to a call no longer waiting nothing, one to the
// SDK's tools/list maxPage, and so may a message whose head shows no id (a
// page whose result comes first must not pass for another message); any
// other message maxLine.
func (c *lineConn) bound(head []byte) *longLine {
	over := &longLine{bound: c.maxLine}
	raw := leadingID(head)
	id, _ := raw.(string)
	if !strings.HasPrefix(id, directIDPrefix) {
		c.callMu.Lock()
		listID := c.listID
		c.callMu.Unlock()
		switch {
		case raw == nil:
			over.bound = min(c.maxLine, c.maxPage)
		case raw == listID.Raw():
			over.page, over.bound = listID, min(c.maxLine, c.maxPage)
		}
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

// leadingID is the id of a JSON-RPC message whose first chunk is head, as
// jsonrpc.ID.Raw gives it (a string or an int64), when that chunk holds it
// among the members before any it cannot read whole (a response's id comes
// before its result); nil otherwise.
func leadingID(head []byte) any {
	dec := json.NewDecoder(bytes.NewReader(head))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key == "id" {
			switch id, _ := dec.Token(); id := id.(type) {
			case string:
				return id
			case json.Number:
				if n, err := id.Int64(); err == nil {
					return n
				}
			}
			return nil
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil
		}
	}
	return nil
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
