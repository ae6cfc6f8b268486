package rpc

import (
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// Every kind of message a server writes, captured from its output, starts with
// "jsonrpc" and has the one member order: id (when it has one), then method and
// params, or result or error.
func TestMessageMemberOrder(t *testing.T) {
	h := start(t)
	expect := func(kind string, names ...string) {
		t.Helper()
		body := h.recv()
		ms, err := wireguard.Members([]byte(body), wireguard.Strict)
		got := make([]string, len(ms))
		for i, m := range ms {
			got[i] = m.Name
		}
		if err != nil || !strings.HasPrefix(body, `{"jsonrpc":"2.0",`) || strings.Join(got, " ") != strings.Join(names, " ") {
			t.Errorf("%s: %s\nmembers %q, want %q", kind, body, got, names)
		}
	}
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)
	expect("initialize result", "jsonrpc", "id", "result")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"nope"}`)
	expect("-32601 error", "jsonrpc", "id", "error")
	h.send(`{"jsonrpc":"2.0","id":3,`)
	expect("-32700 error (id null)", "jsonrpc", "id", "error")

	h.send(runReq("4", `{"program":"","stream":true}`))
	r := h.submitted()
	rc := r.c.(*runClient)
	go func() { r.c.Log("4", protocol.LogEvent{Text: "x"}); rc.Flush() }()
	expect("run/log", "jsonrpc", "method", "params")
	cancel := inBackground(func() func() {
		defer rc.Flush()
		return r.c.CallBinding("4", "t", "f", []byte(`[]`), func(session.Answer) {})
	})
	expect("binding/call", "jsonrpc", "id", "method", "params")
	go func() { (<-cancel)(); rc.Flush() }()
	expect("$/cancelRequest", "jsonrpc", "method", "params")
	go r.onResult(protocol.Result{Value: []byte(`1`), Logs: []string{}})
	expect("run result", "jsonrpc", "id", "result")

	h.send(`{"jsonrpc":"2.0","id":5,"method":"shutdown"}`)
	expect("shutdown null", "jsonrpc", "id", "result")
}
