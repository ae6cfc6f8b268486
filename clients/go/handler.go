package coderun

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// handler serves what the daemon sends: binding/call requests (each on a
// goroutine of its own, so the read goroutine never waits for a host
// function, CONTRIBUTING.md habit 1), $/cancelRequest for them, and the
// run/log, run/output and session/closed notifications (inline, in order).
type handler struct{ c *Client }

// hostRejection is the error object of a binding call the host rejected.
type hostRejection = jsonrpc2.Error

// rejectionCode is the code of a host's rejection; the daemon ignores it
// (docs/protocol.md §4.2).
const rejectionCode = -32000

func rejection(message, pyType string) *hostRejection {
	e := &jsonrpc2.Error{Code: rejectionCode, Message: message}
	if pyType != "" {
		e.SetError(map[string]string{"type": pyType})
	}
	return e
}

func (h handler) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	params := h.c.stream.params // exact, unlike req.Params (exact.go)
	switch req.Method {
	case protocol.MethodBindingCall:
		if !req.Notif {
			h.bindingCall(conn, req.ID, params)
		}
	case protocol.MethodCancelRequest:
		h.cancelCall(params)
	case protocol.MethodRunLog:
		var ev struct {
			RunID json.RawMessage `json:"runId"`
			LogEvent
		}
		if json.Unmarshal(params, &ev) == nil {
			if r := h.c.liveRun(ev.RunID); r != nil && r.onLog != nil {
				r.onLog(ev.LogEvent)
			}
		}
	case protocol.MethodRunOutput:
		var ev struct {
			RunID json.RawMessage `json:"runId"`
			Output
		}
		if json.Unmarshal(params, &ev) == nil {
			if r := h.c.liveRun(ev.RunID); r != nil && r.onOutput != nil {
				r.onOutput(ev.Output)
			}
		}
	case protocol.MethodSessionClosed:
		var ev SessionClosed
		if json.Unmarshal(params, &ev) == nil && h.c.opts.OnSessionClosed != nil {
			h.c.opts.OnSessionClosed(ev)
		}
	default:
		if !req.Notif {
			_ = conn.ReplyWithError(ctx, req.ID, &jsonrpc2.Error{Code: protocol.CodeMethodNotFound, Message: "method not found: " + req.Method})
		}
	}
}

// maxCallsInFlight bounds the binding calls a connection serves at once, each
// on a goroutine of its own, so a daemon that floods binding/call cannot make
// the host start goroutines without end; a call past it is rejected at once.
const maxCallsInFlight = 10000

// bindingCall starts serving one binding/call. Its context ends when the
// daemon withdraws the call or the connection ends; a withdrawn call is not
// answered (the daemon would ignore the answer).
func (h handler) bindingCall(conn *jsonrpc2.Conn, id jsonrpc2.ID, params json.RawMessage) {
	var p struct {
		RunID     json.RawMessage `json:"runId"`
		Namespace string          `json:"namespace"`
		Function  string          `json:"function"`
		Args      json.RawMessage `json:"args"`
	}
	var f Function
	found := false
	if json.Unmarshal(params, &p) == nil {
		if r := h.c.liveRun(p.RunID); r != nil {
			f, found = r.functions[p.Namespace][p.Function]
		}
	}
	if !found {
		_ = conn.ReplyWithError(context.Background(), id, rejection("no such binding function for this run", ""))
		return
	}
	if p.Args == nil {
		p.Args = json.RawMessage("null")
	}
	key := id
	ctx, cancel := context.WithCancel(h.c.connCtx)
	h.c.mu.Lock()
	full := len(h.c.calls) >= maxCallsInFlight
	if !full {
		h.c.calls[key] = cancel
	}
	h.c.mu.Unlock()
	if full {
		cancel()
		_ = conn.ReplyWithError(context.Background(), id, rejection(fmt.Sprintf("coderun: more than %d binding calls in flight on this connection", maxCallsInFlight), ""))
		return
	}
	go func() {
		defer cancel()
		result, rejected := answer(ctx, f, p.Args)
		h.c.mu.Lock()
		_, live := h.c.calls[key]
		delete(h.c.calls, key)
		h.c.mu.Unlock()
		if !live {
			return
		}
		if rejected != nil {
			_ = conn.ReplyWithError(context.Background(), id, rejected)
			return
		}
		_ = h.c.stream.writeResult(id, result)
	}()
}

// cancelCall withdraws a binding call the daemon no longer needs.
func (h handler) cancelCall(params json.RawMessage) {
	var p struct {
		ID jsonrpc2.ID `json:"id"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	h.c.mu.Lock()
	cancel, ok := h.c.calls[p.ID]
	delete(h.c.calls, p.ID)
	h.c.mu.Unlock()
	if ok {
		cancel()
	}
}
