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
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// serveStream serves one accepted unix or tcp connection: the token (when
// configured) within the door's cap and time, then the connection cap,
// then the protocol. Authentication comes first so that connections which
// never present a token cannot spend the connection cap.
func (s *service) serveStream(c net.Conn) {
	var in io.Reader = c
	if s.opts.Token != "" {
		if !s.enterDoor() {
			refuse(c, s.tooManyUnauthenticated())
			return
		}
		br, err := s.authenticateStream(c)
		s.leaveDoor()
		if err != nil {
			s.metrics.refused.WithLabelValues("auth").Inc()
			s.log.Warn("connection refused", "reason", err.Error())
			refuse(c, err.Error())
			return
		}
		in = br
	}
	id, ok := s.admit()
	if !ok {
		refuse(c, s.tooMany())
		return
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
func (r *readConn) end() error {
	r.ending.Store(true)
	return r.c.SetReadDeadline(time.Now())
}

func (r *readConn) Close() error { return r.c.Close() }

// authError is a refused token; its text is the error message the client
// receives.
type authError string

func (e authError) Error() string { return string(e) }

// authenticateStream reads the first header line, which must be
// "Authorization: Bearer <token>", within AuthTimeout. The reader it
// returns holds whatever followed the line (docs/service.md §2).
func (s *service) authenticateStream(c net.Conn) (*bufio.Reader, error) {
	_ = c.SetReadDeadline(time.Now().Add(s.opts.AuthTimeout))
	br := bufio.NewReaderSize(c, protocol.HeaderBlockCap)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, authError("authentication required: no complete first header line (Authorization: Bearer <token>) within " +
			strconv.FormatFloat(s.opts.AuthTimeout.Seconds(), 'f', -1, 64) + " s and " + strconv.Itoa(protocol.HeaderBlockCap) + " bytes")
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

// refuseTimeout bounds the refusal's write and the wait for the client to
// take it: a refused connection holds its descriptor no longer.
const refuseTimeout = 2 * time.Second

// refuse answers a connection no server serves with one −32600 error
// (id null) and closes it.
func refuse(c net.Conn, msg string) {
	body := wire.ErrorBody(protocol.CodeInvalidRequest, msg)
	_ = c.SetWriteDeadline(time.Now().Add(refuseTimeout))
	_, _ = c.Write(append([]byte("Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"), body...))
	closeAfterWrite(c)
}

// closeAfterWrite closes c so that what was written reaches the client: a
// TCP close with input still unread resets the connection, which can
// discard the reply, so the input is drained first. With a half-close the
// client sees the end and the drain ends with it (refuseTimeout at most); a
// connection without one (the listener's limit wraps every connection, and
// its wrapper hides CloseWrite) drains for unreadWait only, enough to take
// what the client sent before the reply.
func closeAfterWrite(c net.Conn) {
	wait := unreadWait
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		wait = refuseTimeout
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	_ = c.Close()
}

// unreadWait bounds closeAfterWrite's drain of a connection it cannot
// half-close.
const unreadWait = 200 * time.Millisecond

// stallWriter writes to a connection in pieces, each of which must make
// progress within stall; a client that stops reading has its connection
// closed (which ends its runs), so its unread output never piles up and
// never holds the daemon (docs/service.md §4). SetWriteDeadline (rpc's, as
// it tears down) caps every piece's deadline from then on.
type stallWriter struct {
	c     net.Conn
	stall time.Duration
	limit writeCap
}

const stallPiece = 64 << 10

func (w *stallWriter) SetWriteDeadline(t time.Time) error {
	w.limit.set(t)
	return w.c.SetWriteDeadline(t)
}

func (w *stallWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		_ = w.c.SetWriteDeadline(w.limit.deadline(w.stall))
		k, err := w.c.Write(p[n:min(len(p), n+stallPiece)])
		n += k
		if err != nil {
			_ = w.c.Close()
			return n, err
		}
	}
	return n, nil
}

// writeCap is the latest a write may end once one is set: the deadline of
// each piece is its stall bound, or the cap when that comes first.
type writeCap struct{ unixNano atomic.Int64 } // 0: none

func (c *writeCap) set(t time.Time) { c.unixNano.Store(t.UnixNano()) }

// deadline is now + stall, or the cap when it is earlier.
func (c *writeCap) deadline(stall time.Duration) time.Time {
	d := time.Now().Add(stall)
	if n := c.unixNano.Load(); n != 0 && n < d.UnixNano() {
		return time.Unix(0, n)
	}
	return d
}
