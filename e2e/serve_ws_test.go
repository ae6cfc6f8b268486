package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// WebSocket listener (docs/service.md §1): one JSON-RPC message per text
// message, the token in the HTTP Authorization header.

// wsDial opens a WebSocket to the service with token (none when "") and a
// write buffer of writeBuf bytes (a small one fragments every message).
func (s *service) wsDial(token string, writeBuf int) *websocket.Conn {
	s.t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{WriteBufferSize: writeBuf, HandshakeTimeout: 10 * time.Second}
	c, _, err := d.Dial("ws://"+s.listen+"/rpc", h)
	if err != nil {
		s.t.Fatalf("dial: %v", err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

// wsMsg is one message the daemon sent.
type wsMsg struct {
	ID     json.RawMessage
	Method string
	Params struct {
		Args json.RawMessage
	}
	Result json.RawMessage
	Error  *struct {
		Code    int64
		Message string
	}
}

// wsExchange sends body and reads messages until the response with id,
// answering every binding/call with its arguments.
func wsExchange(t *testing.T, c *websocket.Conn, body, id string) wsMsg {
	t.Helper()
	if err := c.WriteMessage(websocket.TextMessage, []byte(body)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		kind, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		if kind != websocket.TextMessage {
			t.Fatalf("the daemon sent a message of type %d", kind)
		}
		var m wsMsg
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("message %q: %v", data, err)
		}
		if m.Method == "binding/call" {
			reply := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + string(m.Params.Args) + `}`
			if err := c.WriteMessage(websocket.TextMessage, []byte(reply)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if string(m.ID) == id {
			return m
		}
	}
}

func TestServeWebSocket(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_AUTH_TOKEN": "tok", "CODERUN_MAX_LOG_BYTES": "200000"}, "ws://127.0.0.1:0/rpc")
	// A 64-byte write buffer sends every message in many fragments.
	c := s.wsDial("tok", 64)
	if m := wsExchange(t, c, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "1"); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	m := wsExchange(t, c, `{"jsonrpc":"2.0","id":2,"method":"run","params":{"program":"print('y'*100000)\nreturn await tools.echo(41)","bindings":[{"global":"tools","functions":["echo"]}]}}`, "2")
	var r runResult
	if err := json.Unmarshal(m.Result, &r); err != nil || string(r.Value) != "41" || len(strings.Join(r.Logs, "")) < 100000 {
		t.Fatalf("run over WebSocket: %s %v", m.Result, err)
	}

	bin := s.wsDial("tok", 0)
	if err := bin.WriteMessage(websocket.BinaryMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	_ = bin.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, _, err := bin.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != websocket.CloseUnsupportedData || !strings.Contains(ce.Text, "text message") {
		t.Errorf("binary message: %v, want close 1003 saying to send text", err)
	}

	wrong := s.wsDial("nope", 0)
	_ = wrong.SetReadDeadline(time.Now().Add(20 * time.Second))
	kind, data, err := wrong.ReadMessage()
	if err != nil || kind != websocket.TextMessage || !strings.Contains(string(data), `"code":-32600`) ||
		!strings.Contains(string(data), "wrong bearer token") {
		t.Errorf("wrong token: %d %q %v, want one -32600", kind, data, err)
	}
	if _, _, err := wrong.ReadMessage(); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("after the refusal: %v, want close 1008", err)
	}
	// The first connection is still served.
	if m := wsExchange(t, c, `{"jsonrpc":"2.0","id":3,"method":"run","params":{"program":"return 5"}}`, "3"); !strings.Contains(string(m.Result), `"value":5`) {
		t.Errorf("after the others: %s", m.Result)
	}
}

// TestServeWebSocketOversize: a message over the inbound cap closes the
// connection with 1009 (message too big).
func TestServeWebSocketOversize(t *testing.T) {
	t.Parallel()
	s := startService(t, nil, "ws://127.0.0.1:0/rpc")
	c := s.wsDial("", 0)
	big := `{"jsonrpc":"2.0","id":1,"method":"run","params":{"program":"` + strings.Repeat("#", 64<<20) + `"}}`
	go c.WriteMessage(websocket.TextMessage, []byte(big))
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Errorf("oversize message: %v, want close 1009", err)
	}
}
