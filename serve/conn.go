package serve

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/rpc"
)

// serveStream serves one accepted unix or tcp connection: the connection
// cap, then the token (when configured), then the protocol.
func (s *service) serveStream(c net.Conn) {
	id, ok := s.admit()
	if !ok {
		refuse(c, s.tooMany())
		return
	}
	var in io.Reader = c
	if s.opts.Token != "" {
		br, err := s.authenticateStream(c)
		if err != nil {
			s.metrics.refused.WithLabelValues("auth").Inc()
			s.log.Warn("connection refused", "conn", id, "reason", err.Error())
			refuse(c, err.Error())
			s.release()
			return
		}
		in = br
	}
	s.serveConn(id, &readConn{Reader: in, c: c}, &stallWriter{c: c, stall: s.opts.WriteStall})
}

// readConn reads from the connection (or from what is buffered after its
// token line) and closes it.
type readConn struct {
	io.Reader
	c      net.Conn
	ending atomic.Bool
}

func (r *readConn) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	if err != nil && r.ending.Load() {
		err = io.EOF
	}
	return n, err
}

// end makes the connection's input end now: a read in progress returns at
// its deadline, and it and every later one report io.EOF.
func (r *readConn) end() {
	r.ending.Store(true)
	_ = r.c.SetReadDeadline(time.Now())
}

func (r *readConn) Close() error { return r.c.Close() }

// authError is a refused token; its text is the error message the client
// receives.
type authError string

func (e authError) Error() string { return string(e) }

// authenticateStream reads the first header line, which must be
// "Authorization: Bearer <token>", within handshakeTimeout. The reader it
// returns holds whatever followed the line (docs/service.md §2).
func (s *service) authenticateStream(c net.Conn) (*bufio.Reader, error) {
	_ = c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReaderSize(c, protocol.HeaderBlockCap)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, authError("authentication required: no complete first header line (Authorization: Bearer <token>) within " +
			strconv.Itoa(int(handshakeTimeout.Seconds())) + " s and " + strconv.Itoa(protocol.HeaderBlockCap) + " bytes")
	}
	_ = c.SetReadDeadline(time.Time{})
	name, value, _ := strings.Cut(strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r"), ":")
	if !strings.EqualFold(strings.TrimSpace(name), "Authorization") {
		return nil, authError("authentication required: the first header line must be Authorization: Bearer <token>")
	}
	return br, s.checkToken(strings.TrimSpace(value))
}

// checkToken checks an Authorization value ("Bearer <token>").
func (s *service) checkToken(value string) error {
	scheme, tok, _ := strings.Cut(value, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return authError("authentication required: the Authorization scheme must be Bearer")
	}
	if !tokenEqual(strings.TrimSpace(tok), s.opts.Token) {
		return authError("authentication failed: wrong bearer token")
	}
	return nil
}

// tokenEqual compares in constant time; hashing first makes the time
// independent of the lengths as well.
func tokenEqual(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// refuse answers a connection no rpc.Server serves with one −32600 error
// (id null) and closes it.
func refuse(c net.Conn, msg string) {
	body := rpc.ErrorBody(protocol.CodeInvalidRequest, msg)
	_ = c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	_, _ = c.Write(append([]byte("Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"), body...))
	closeAfterWrite(c)
}

// closeAfterWrite closes c so that what was written reaches the client: a
// TCP close with unread input would reset the connection and could
// discard the reply, so the write side is shut first and the input
// drained for a moment.
func closeAfterWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	}
	_ = c.Close()
}

// stallWriter writes to a connection in pieces, each of which must make
// progress within stall; a client that stops reading has its connection
// closed (which ends its runs), so its unread output never piles up and
// never holds the daemon (docs/service.md §4).
type stallWriter struct {
	c     net.Conn
	stall time.Duration
}

const stallPiece = 64 << 10

func (w *stallWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		_ = w.c.SetWriteDeadline(time.Now().Add(w.stall))
		k, err := w.c.Write(p[n:min(len(p), n+stallPiece)])
		n += k
		if err != nil {
			_ = w.c.Close()
			return n, err
		}
	}
	return n, nil
}
