package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// intercept answers CONNECT to a host a secret is bound to: it terminates
// the program's TLS with a leaf the daemon's CA mints for t's host, then
// reads HTTP/1.1 requests from the tunnel and forwards each, checked and
// with the run's secrets, to t over TLS verified against the daemon's own
// roots. Each inner request is audited and charged as a request of its own.
func (g *Grant) intercept(w http.ResponseWriter, t target, entry int, start time.Time) {
	leaf, err := g.p.opts.CA.leaf(t.host)
	if err != nil {
		g.finish(entry, http.StatusInternalServerError, 0, start)
		refuse(w, http.StatusInternalServerError, "egress refused: the proxy cannot make a certificate for "+t.host)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	if !g.track(down) {
		down.Close()
		return
	}
	defer g.untrack(down)
	_, _ = down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	g.established(entry)
	tc := tls.Server(&bufferedConn{Conn: down, r: rw.Reader}, &tls.Config{
		Certificates: []tls.Certificate{*leaf}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	_ = down.SetDeadline(time.Now().Add(readHeaderTimeout))
	if err := tc.HandshakeContext(g.ctx); err != nil {
		g.finish(entry, http.StatusBadGateway, 0, start)
		return
	}
	_ = down.SetDeadline(time.Time{})
	var n int64
	// The request line and headers are read within maxHeaderBytes (what
	// the proxy's own server allows), the body then without that bound.
	head := &io.LimitedReader{R: &meteredReader{r: tc, g: g}}
	br := bufio.NewReader(head)
	for {
		_ = down.SetReadDeadline(time.Now().Add(readHeaderTimeout))
		head.N = maxHeaderBytes
		req, err := http.ReadRequest(br)
		if err != nil {
			break
		}
		head.N = math.MaxInt64
		_ = down.SetReadDeadline(time.Time{})
		m, keep := g.forwardInner(tc, req, t)
		n += m
		if !keep {
			break
		}
	}
	g.finish(entry, http.StatusOK, n, start)
}

// bufferedConn reads through r (the hijacked connection's buffer, which
// may hold the start of the program's handshake).
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// forwardInner forwards one request read from an intercepted tunnel to t
// and writes its response to tc: the response bytes written, and whether
// the tunnel may carry another request.
func (g *Grant) forwardInner(tc *tls.Conn, req *http.Request, t target) (int64, bool) {
	start := time.Now()
	entry := g.begin(t, recordedMethod(req.Method))
	status, msg := g.admitInner(req, t)
	if msg == "" {
		if err := g.bound.check(t.host, req.RequestURI, req.Header); err != nil {
			status, msg = http.StatusForbidden, err.Error()
		}
	}
	if msg != "" {
		g.finish(entry, status, 0, start)
		writeRefusal(tc, req, status, msg)
		return 0, false
	}
	ctx, cancel := context.WithCancel(context.WithValue(g.ctx, targetKey{}, t))
	defer cancel()
	out := req.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "https", hostPort(t)
	out.Host = out.URL.Host
	removeHopHeaders(out.Header)
	g.bound.inject(t.host, out.Header, &out.URL.RawQuery)
	resp, err := g.tr.RoundTrip(out)
	if err != nil {
		if errors.Is(err, errBudget) {
			msg = errBudget.Error()
		} else {
			// A dial's reason, the upstream's certificate, or its malformed
			// answer, which may quote the request.
			msg = g.bound.redactText(t.host, "egress refused or failed: "+err.Error())
		}
		g.finish(entry, http.StatusBadGateway, 0, start)
		writeRefusal(tc, req, http.StatusBadGateway, msg)
		return 0, false
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	g.bound.redact(t.host, resp.Header)
	resp.Status = g.bound.redactText(t.host, resp.Status) // its reason phrase is written as the upstream's
	resp.Body = &meteredBody{ReadCloser: resp.Body, g: g}
	// The trailers are read with the body's end and written after it.
	resp.Body = &atEOF{ReadCloser: resp.Body, do: func() { g.bound.redact(t.host, resp.Trailer) }}
	cw := &countingWriter{w: tc}
	err = resp.Write(cw)
	g.finish(entry, resp.StatusCode, cw.n, start)
	return cw.n, err == nil && !req.Close && !resp.Close && drained(req.Body)
}

// drained reports whether body was read to its end (reading at most a
// little more of it): the next request starts right after it.
func drained(body io.Reader) bool {
	n, err := io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	return err == nil && n < 64<<10
}

// admitInner checks a request inside an intercepted tunnel: its method, its
// Host (the tunnel's own: a request may not name another host than the one
// the tunnel was admitted for) and the policy with its methods.
func (g *Grant) admitInner(req *http.Request, t target) (int, string) {
	if recordedMethod(req.Method) != req.Method {
		return http.StatusForbidden, "egress refused: the proxy forwards " + strings.Join(proxiedMethods, ", ") + " only"
	}
	if req.Method == http.MethodConnect { // a tunnel inside the tunnel: the upstream is an origin, not a proxy
		return http.StatusForbidden, "egress refused: CONNECT is not forwarded inside an intercepted tunnel"
	}
	if req.Header.Get("Upgrade") != "" {
		return http.StatusForbidden, "egress refused: protocol upgrades are not forwarded through an intercepted tunnel"
	}
	host, port, ok := splitTarget(req.Host, "443")
	if !ok || host != t.host || port != t.port || req.URL.IsAbs() && req.URL.Host != req.Host {
		return http.StatusForbidden, fmt.Sprintf("egress refused: the request's Host is not the tunnel's (%s)", hostPort(t))
	}
	if _, msg := g.allow(t, req.Method); msg != "" {
		return http.StatusForbidden, msg
	}
	return 0, ""
}

func hostPort(t target) string { return net.JoinHostPort(t.host, strconv.Itoa(int(t.port))) }

// writeRefusal answers req inside a tunnel with status and msg; the tunnel
// closes after it (the request's body is not read).
func writeRefusal(w io.Writer, req *http.Request, status int, msg string) {
	body := msg + "\n"
	resp := &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Request: req, Close: true,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}
	_ = resp.Write(w)
}

// hopHeaders are removed from every forwarded request and response
// (RFC 9110 §7.6.1), with the headers their Connection names.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); httpguts.ValidHeaderFieldName(f) {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// atEOF calls do once, when its body returns io.EOF (the transport has
// read the trailers then).
type atEOF struct {
	io.ReadCloser
	do   func()
	done bool
}

func (b *atEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.do()
	}
	return n, err
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
