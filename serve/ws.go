package serve

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// wsServer serves the ws:// listener at addr: the upgrade at the
// address's path, the connection cap and the token (the Authorization
// header) before it. The upgrader keeps gorilla's same-origin check: a web
// page on another origin cannot drive a daemon listening on loopback
// without a token; without a token the Host must also be a loopback name
// (door.go), so a page whose name was rebound to 127.0.0.1 cannot either.
// The request's headers must arrive within AuthTimeout, and until the
// upgrade the connection counts as unauthenticated (the door's gauge).
func (s *service) wsServer(addr net.Addr) *http.Server {
	up := &websocket.Upgrader{HandshakeTimeout: s.opts.AuthTimeout, ReadBufferSize: 4 << 10, WriteBufferSize: 4 << 10}
	_, port, _ := net.SplitHostPort(addr.String())
	mux := http.NewServeMux()
	mux.HandleFunc(s.opts.Listen.Path, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != s.opts.Listen.Path {
			http.NotFound(w, r)
			return
		}
		if s.opts.Token == "" && !loopbackHost(r.Host, port) {
			http.Error(w, "the Host must be 127.0.0.1, [::1] or localhost with the listener's port", http.StatusForbidden)
			return
		}
		var authErr error
		if s.opts.Token != "" {
			authErr = s.checkToken(r.Header.Get("Authorization"))
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return // the upgrader answered the HTTP request
		}
		if authErr != nil {
			s.metrics.refused.WithLabelValues("auth").Inc()
			refuseWS(c, websocket.ClosePolicyViolation, authErr.Error())
			return
		}
		id, ok := s.admit()
		if !ok {
			refuseWS(c, websocket.CloseTryAgainLater, s.tooMany())
			return
		}
		// Each message is one JSON-RPC message; a body over the inbound
		// cap closes the connection with 1009 (message too big).
		c.SetReadLimit(protocol.InboundMessageCap)
		s.serveConn(id, &wsReader{c: c}, &wsWriter{c: c, stall: s.opts.WriteStall})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: s.opts.AuthTimeout, ConnState: s.countUpgrading}
	// One request per connection: an idle keep-alive connection would hold
	// its place under the listener's bound with no deadline at all.
	srv.SetKeepAlivesEnabled(false)
	return srv
}

// countUpgrading counts a WebSocket connection as unauthenticated from its
// acceptance until its upgrade (hijacked) or its end.
func (s *service) countUpgrading(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.pending.Add(1)
	case http.StateHijacked, http.StateClosed:
		s.pending.Add(-1)
	}
}

// refuseWS sends one −32600 error (id null) as a text message, then a
// close frame with code and closes.
func refuseWS(c *websocket.Conn, code int, msg string) {
	deadline := time.Now().Add(refuseTimeout)
	_ = c.SetWriteDeadline(deadline)
	_ = c.WriteMessage(websocket.TextMessage, wire.ErrorBody(protocol.CodeInvalidRequest, msg))
	_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, truncate(msg, 120)), deadline)
	_ = c.Close()
}

// truncate keeps a close reason within the 123 bytes a close frame allows.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// wsReader turns each text message into one LSP-framed message for rpc's
// reader. A binary message is refused: the connection is closed with 1003
// (unsupported data) and a reason saying why; rpc then sees the end of its
// input. Fragmented messages arrive whole (the library joins them).
type wsReader struct {
	c       *websocket.Conn
	pending bytes.Reader
}

func (r *wsReader) Read(p []byte) (int, error) {
	for r.pending.Len() == 0 {
		kind, msg, err := r.c.ReadMessage()
		if err != nil {
			return 0, io.EOF
		}
		if kind != websocket.TextMessage {
			reason := "binary messages are not accepted: send each JSON-RPC message as one text message"
			_ = r.c.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseUnsupportedData, reason), time.Now().Add(time.Second))
			return 0, io.EOF
		}
		framed := make([]byte, 0, len(msg)+32)
		framed = append(append(append(framed, "Content-Length: "...), strconv.Itoa(len(msg))...), "\r\n\r\n"...)
		r.pending.Reset(append(framed, msg...))
	}
	return r.pending.Read(p)
}

func (r *wsReader) Close() error { return r.c.Close() }

// end makes a read in progress, and every later one, end (Read reports
// every failure as io.EOF).
func (r *wsReader) end() error { return r.c.SetReadDeadline(time.Now()) }

// wsWriter turns rpc's LSP-framed output back into one text message per
// body. rpc writes exactly "Content-Length: N\r\n\r\n" before each body
// (rpc/outbound.go); the body streams into the message as it comes, so a
// large result is not held twice. Each piece must make progress within
// stall, else the connection is closed (as for streams).
type wsWriter struct {
	c      *websocket.Conn
	stall  time.Duration
	limit  writeCap       // SetWriteDeadline's, as for streams
	header []byte         // the header read so far
	left   int            // body bytes still to come
	msg    io.WriteCloser // the message being written
}

var errBadFrame = errors.New("serve: unexpected frame header from rpc")

// SetWriteDeadline caps every later write's deadline (rpc's, as it tears
// down) and the write in progress: on the network connection, since
// gorilla's own deadline belongs to the writing goroutine.
func (w *wsWriter) SetWriteDeadline(t time.Time) error {
	w.limit.set(t)
	return w.c.NetConn().SetWriteDeadline(t)
}

func (w *wsWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if w.msg == nil {
			var err error
			if p, err = w.readHeader(p); err != nil {
				_ = w.c.Close()
				return 0, err
			}
			continue
		}
		k := min(len(p), w.left, stallPiece)
		_ = w.c.SetWriteDeadline(w.limit.deadline(w.stall))
		if _, err := w.msg.Write(p[:k]); err != nil {
			_ = w.c.Close()
			return 0, err
		}
		p, w.left = p[k:], w.left-k
		if w.left == 0 {
			err := w.msg.Close()
			w.msg = nil
			if err != nil {
				_ = w.c.Close()
				return 0, err
			}
		}
	}
	return n, nil
}

// readHeader consumes header bytes from p; once the header is complete it
// opens the message (and closes an empty one at once).
func (w *wsWriter) readHeader(p []byte) ([]byte, error) {
	i := bytes.IndexByte(p, '\n')
	end := i >= 0 && bytes.HasSuffix(append(w.header, p[:i+1]...), []byte("\r\n\r\n"))
	if !end {
		if i < 0 {
			w.header = append(w.header, p...)
			return nil, nil
		}
		w.header = append(w.header, p[:i+1]...)
		return p[i+1:], nil
	}
	w.header = append(w.header, p[:i+1]...)
	digits, ok := bytes.CutPrefix(bytes.TrimSuffix(w.header, []byte("\r\n\r\n")), []byte("Content-Length: "))
	n, err := strconv.Atoi(string(digits))
	w.header = w.header[:0]
	if !ok || err != nil {
		return nil, errBadFrame
	}
	_ = w.c.SetWriteDeadline(w.limit.deadline(w.stall))
	if w.msg, err = w.c.NextWriter(websocket.TextMessage); err != nil {
		return nil, err
	}
	w.left = n
	if n == 0 {
		err = w.msg.Close()
		w.msg = nil
	}
	return p[i+1:], err
}
