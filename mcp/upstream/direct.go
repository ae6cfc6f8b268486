package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/wireguard"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Direct tool calls on a stdio connection (bench/history-2026-12.md §12). The
// SDK's CallTool decodes every result twice, each time through a decoder that
// allocates a fresh 32 KiB buffer: that was most of the daemon's garbage and
// about a third of its CPU per upstream call, while the daemon needs only the
// result's raw text. So on a connection of this package's own stdio transport
// a tools/call is one request line written here with an id of its own, a
// string starting "coderun-" that never meets the SDK's integer ids; Read
// hands the matching response to the call's reply function before the SDK
// sees it. That function runs on the reader goroutine: Server.Start answers a
// program's call from there, so no goroutine waits for the response and none
// is woken to take it over; Server.Call waits on a channel. The SDK keeps
// everything else: the handshake, tools/list, the server's notifications and
// its requests to the client.
//
// What keeps the two paths alike:
//   - A direct call is made only once the SDK's own tools/list request has
//     gone out on the connection, and carries that request's "_meta" (the
//     per-request protocol version, client info and capabilities that
//     revision 2026-07-28 asks for; none before it).
//   - A result that asks the client for input first (a multi-round-trip
//     result, with "inputRequests") is not handled here: the call is made
//     again through the SDK, which answers such requests and retries, as the
//     protocol has the client do anyway.
//   - A session that negotiated a revision newer than newestDirectVersion is
//     called through the SDK, and so is a streamable-HTTP server.

// newestDirectVersion is the newest protocol revision whose tools/call this
// file knows.
const newestDirectVersion = "2026-07-28"

// directIDPrefix starts the id of every direct call.
const directIDPrefix = "coderun-"

// directReply is a direct call's response: the raw result, or the error.
type directReply struct {
	result json.RawMessage
	err    error
}

// directCalls reports whether cs negotiated a revision whose tools/call this
// file can make itself.
func directCalls(cs *mcp.ClientSession) bool {
	init := cs.InitializeResult()
	return init != nil && init.ProtocolVersion <= newestDirectVersion
}

// errNotListed refuses a direct call before the SDK's first tools/list on the
// connection, whose "_meta" the call would carry: such a call goes through
// the SDK.
var errNotListed = errors.New("no tools/list has been sent on the connection yet")

// noteListing keeps the "_meta" of a tools/list request the SDK sends.
func (c *lineConn) noteListing(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "tools/list" {
		return
	}
	var meta json.RawMessage
	if ms, err := wireguard.Members(req.Params, wireguard.Strict); err == nil {
		if m, ok := wireguard.Last(ms, "_meta"); ok && wireguard.KindOf(m.Value) == wireguard.KindObject {
			meta = bytes.Clone(m.Value)
		}
	}
	c.callMu.Lock()
	c.meta, c.hasListed, c.listID = meta, true, req.ID
	c.callMu.Unlock()
}

// replyFunc receives a direct call's response: the raw result, or the error
// (a *jsonrpc.Error from the server, or the end of the connection). It runs on
// the connection's reader goroutine, so it must not wait for the connection.
type replyFunc func(result json.RawMessage, err error)

// waiting is a direct call waiting for its response, whose result b will be
// billed: the reader holds no more of it than b may still take.
type waiting struct {
	done replyFunc
	b    *Budget
}

// newCall registers done for a call about to be sent, its result billed to
// b, and returns its id and the "_meta" it carries (nil for none);
// errNotListed, or why the connection ended, when it cannot be made.
func (c *lineConn) newCall(b *Budget, done replyFunc) (id string, meta json.RawMessage, err error) {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	switch {
	case c.ended != nil:
		return "", nil, c.ended
	case !c.hasListed:
		return "", nil, errNotListed
	}
	c.lastID++
	id = directIDPrefix + strconv.FormatUint(c.lastID, 10)
	c.calls[id] = waiting{done, b}
	return id, c.meta, nil
}

// send writes the call id (from newCall, with its meta) of tool with args (a
// JSON object's text, or nil for none).
func (c *lineConn) send(id, tool string, args, meta json.RawMessage) error {
	if err := c.writeLine(context.Background(), callLine(id, tool, args, meta)); err != nil {
		c.forget(id)
		return fmt.Errorf("%w: sending the call: %v", mcp.ErrConnectionClosed, err)
	}
	return nil
}

// abandon forgets the call id, whose caller no longer waits, and tells the
// server it was cancelled for reason. The notification is written off the
// caller's path: a server that stopped reading must not hold the caller.
func (c *lineConn) abandon(id, reason string) {
	if !c.forget(id) {
		return
	}
	params, _ := json.Marshal(&mcp.CancelledParams{RequestID: id, Reason: reason})
	go c.Write(context.Background(), &jsonrpc.Request{Method: "notifications/cancelled", Params: params})
}

// callTool calls tool and waits for the response's raw result (see newCall,
// send and replyFunc). When ctx ends first, the call is abandoned.
func (c *lineConn) callTool(ctx context.Context, tool string, args json.RawMessage, b *Budget) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply := make(chan directReply, 1)
	id, meta, err := c.newCall(b, func(result json.RawMessage, err error) { reply <- directReply{result, err} })
	if err != nil {
		return nil, err
	}
	if err := c.send(id, tool, args, meta); err != nil {
		return nil, err
	}
	select {
	case r := <-reply:
		return r.result, r.err
	case <-ctx.Done():
		c.abandon(id, ctx.Err().Error())
		return nil, ctx.Err()
	}
}

// callLine is a tools/call request, with meta as its "_meta" unless nil.
// Arguments that are not one line are compacted first: a message is one line
// on this transport.
func callLine(id, tool string, args, meta json.RawMessage) []byte {
	if len(args) == 0 {
		args = json.RawMessage("{}") // the SDK never sends absent arguments either
	} else if bytes.ContainsAny(args, "\r\n") {
		var b bytes.Buffer
		if json.Compact(&b, args) == nil {
			args = b.Bytes()
		}
	}
	line := make([]byte, 0, 112+len(tool)+len(args)+len(meta))
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = wireguard.AppendString(line, id)
	line = append(line, `,"method":"tools/call","params":{"name":`...)
	line = wireguard.AppendString(line, tool)
	line = append(line, `,"arguments":`...)
	line = append(line, args...)
	if meta != nil {
		line = append(line, `,"_meta":`...)
		line = append(line, meta...)
	}
	return append(line, "}}\n"...)
}

// forget drops a call that no longer waits, and reports whether it still
// did; its late answer is dropped.
func (c *lineConn) forget(id string) bool {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	_, waiting := c.calls[id]
	delete(c.calls, id)
	return waiting
}

// settle hands a response to the direct call it answers and reports whether
// it was one (a late answer to a call given up on included): such a response
// is never passed to the SDK, which knows nothing of that id.
func (c *lineConn) settle(r *jsonrpc.Response) bool {
	id, ok := r.ID.Raw().(string)
	if !ok || !strings.HasPrefix(id, directIDPrefix) {
		return false
	}
	c.answer(id, r.Result, r.Error)
	return true
}

// answer hands the call id its result or error, unless it no longer waits.
func (c *lineConn) answer(id string, result json.RawMessage, err error) {
	c.callMu.Lock()
	w, ok := c.calls[id]
	delete(c.calls, id)
	c.callMu.Unlock()
	if ok {
		w.done(result, err)
	}
}

// endCalls fails every waiting direct call, and every later one, once the
// connection can no longer answer: err is why reading stopped.
func (c *lineConn) endCalls(err error) {
	err = fmt.Errorf("%w: %v", mcp.ErrConnectionClosed, err)
	c.callMu.Lock()
	if c.ended != nil {
		c.callMu.Unlock()
		return
	}
	c.ended = err
	calls := c.calls
	c.calls = map[string]waiting{}
	c.callMu.Unlock()
	for _, w := range calls {
		w.done(nil, err)
	}
}
