package egress

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"golang.org/x/net/netutil"
)

// Resolver resolves the names the proxy dials (net.DefaultResolver).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Proxy.
type Options struct {
	// Resolver resolves names; nil: net.DefaultResolver.
	Resolver Resolver
	// Hosts are names resolved to these addresses before Resolver is
	// asked (CODERUN_EGRESS_HOSTS; tests map names to loopback with it).
	Hosts map[string]netip.Addr
	// Forbidden are addresses never dialled, whatever the policy (the
	// service's admin address).
	Forbidden []netip.AddrPort
	// CA mints the certificates of intercepted tunnels (to hosts a run's
	// secret is bound to); nil: no tunnel is intercepted.
	CA *CA
	// UpstreamRoots verify the upstreams of intercepted tunnels; nil: the
	// daemon's roots (the system's, or SSL_CERT_FILE's).
	UpstreamRoots *x509.CertPool
	Logger        *slog.Logger
}

// Timeouts of the proxy's own connections. A slow upstream is otherwise
// bounded by its run: a run's connections close when it settles.
const (
	dialTimeout       = 10 * time.Second
	readHeaderTimeout = 10 * time.Second
	maxHeaderBytes    = 64 << 10
	// user is the proxy credentials' user name; the password is the
	// child's token.
	user = "coderun"
)

// Proxy is the daemon's forward proxy: one loopback listener for every
// run, a Grant per run, selected by the token in its credentials.
type Proxy struct {
	opts Options
	log  *slog.Logger
	ln   net.Listener
	srv  *http.Server
	self netip.AddrPort

	mu     sync.Mutex
	grants map[string]*Grant // by token
}

// Listen starts a Proxy on 127.0.0.1 (a port of the kernel's choosing).
func Listen(opts Options) (*Proxy, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{opts: opts, log: opts.Logger, ln: ln, grants: map[string]*Grant{},
		self: ln.Addr().(*net.TCPAddr).AddrPort()}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.opts.Resolver == nil {
		p.opts.Resolver = net.DefaultResolver
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: readHeaderTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:    slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ConnState:   p.connState}
	p.Serve(ln)
	return p, nil
}

// connState drops a connection the program closed from the grants that
// hold it, so that a run opening connection after connection does not
// grow its grant (a hijacked one is its tunnel's to drop).
func (p *Proxy) connState(c net.Conn, s http.ConnState) {
	if s != http.StateClosed {
		return
	}
	p.mu.Lock()
	grants := slices.Collect(maps.Values(p.grants))
	p.mu.Unlock()
	for _, g := range grants {
		g.mu.Lock()
		delete(g.conns, c)
		g.mu.Unlock()
	}
}

// CA is the proxy's CA (nil: it intercepts nothing).
func (p *Proxy) CA() *CA { return p.opts.CA }

// Addr is the proxy's listening address.
func (p *Proxy) Addr() netip.AddrPort { return p.self }

// MaxConnsPerListener bounds the connections the proxy holds open for one
// listener: a child's (Serve) or the loopback one every tier-process child
// (and any local user) can reach. Each costs the daemon a descriptor, and a
// tunnel two; more wait in the accept queue.
const MaxConnsPerListener = 64

// Serve serves proxy requests from ln too (a listener inside a run's
// network namespace), at most MaxConnsPerListener at once, until ln or the
// proxy is closed.
func (p *Proxy) Serve(ln net.Listener) {
	go func() { _ = p.srv.Serve(netutil.LimitListener(ln, MaxConnsPerListener)) }()
}

// Close stops the proxy and every connection it serves.
func (p *Proxy) Close() error { return p.srv.Close() }

// NewToken is a fresh child's token: 128 random bits.
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ProxyURL is the proxy's URL with token as its credentials, reached at at.
func ProxyURL(token string, at netip.AddrPort) string {
	return "http://" + user + ":" + token + "@" + at.String()
}

// Env is the environment that points a child's HTTP clients (urllib,
// requests, httpx, pip) at the proxy, reached at at (Addr, or a listener
// of Serve as the child sees it), with token as its credentials.
func Env(token string, at netip.AddrPort) []string {
	u := ProxyURL(token, at)
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"NO_PROXY=", "no_proxy="}
}

// Budget bounds one run's egress: requests (refused ones included) and the
// bytes of bodies and tunnels, both ways.
type Budget struct {
	MaxRequests, MaxBytes int64
}

// Grant is one run's use of the proxy: its policy, budget and audit.
type Grant struct {
	p      *Proxy
	token  string
	run    string
	policy *Policy
	bound  *Bound // the run's secrets; nil: none
	budget Budget
	ctx    context.Context
	cancel context.CancelFunc
	tr     *http.Transport
	rp     *httputil.ReverseProxy

	mu       sync.Mutex
	closed   bool
	requests int64
	bytes    int64
	entries  []protocol.EgressEntry
	conns    map[net.Conn]struct{} // closed with the grant: tunnels' ends, and the program's connections to the proxy
}

// Open grants the child holding token the policy, secrets (nil: none) and
// budget of run runID until the Grant is closed.
func (p *Proxy) Open(token, runID string, policy *Policy, secrets *Bound, b Budget) *Grant {
	ctx, cancel := context.WithCancel(context.Background())
	g := &Grant{p: p, token: token, run: runID, policy: policy, bound: secrets, budget: b, ctx: ctx, cancel: cancel,
		conns: map[net.Conn]struct{}{}}
	// One transport for forwarded http:// and intercepted https://
	// requests: HTTP/1.1 only (a custom dialer turns HTTP/2 off), the
	// upstream verified against the daemon's roots.
	g.tr = &http.Transport{DialContext: g.dialFor, MaxResponseHeaderBytes: maxHeaderBytes,
		ResponseHeaderTimeout: time.Minute, ForceAttemptHTTP2: false, TLSHandshakeTimeout: dialTimeout,
		TLSClientConfig: &tls.Config{RootCAs: p.opts.UpstreamRoots, MinVersion: tls.VersionTLS12}}
	g.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.Host = pr.In.Host
			if t, ok := pr.Out.Context().Value(targetKey{}).(target); ok {
				g.bound.inject(t.host, pr.Out.Header, &pr.Out.URL.RawQuery)
			}
		},
		Transport:      g.tr,
		ModifyResponse: g.meterResponse,
		ErrorHandler:   g.upstreamError,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	p.mu.Lock()
	p.grants[token] = g
	p.mu.Unlock()
	return g
}

// Close revokes the grant: later requests with its token are refused, its
// open requests and tunnels end, and so do the connections its requests
// came on (one left idle between requests would otherwise outlive the run,
// holding one of its listener's MaxConnsPerListener). It returns the run's
// audit.
func (g *Grant) Close() []protocol.EgressEntry {
	g.p.mu.Lock()
	delete(g.p.grants, g.token)
	g.p.mu.Unlock()
	g.cancel()
	g.mu.Lock()
	g.closed = true
	for c := range g.conns {
		c.Close()
	}
	entries := g.entries
	g.mu.Unlock()
	g.tr.CloseIdleConnections()
	if entries == nil {
		entries = []protocol.EgressEntry{}
	}
	return entries
}

// grantOf is the grant named by r's proxy credentials, or nil.
func (p *Proxy) grantOf(r *http.Request) *Grant {
	auth, ok := strings.CutPrefix(r.Header.Get("Proxy-Authorization"), "Basic ")
	if !ok {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(auth)
	if err != nil {
		return nil
	}
	u, token, ok := strings.Cut(string(raw), ":")
	if !ok || u != user {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grants[token]
}

// ServeHTTP serves one proxy request: CONNECT opens a tunnel, an absolute
// http:// URL is forwarded; each is checked against the run's policy.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g := p.grantOf(r)
	if c, ok := r.Context().Value(connKey{}).(net.Conn); g != nil && ok && !g.track(c) {
		g = nil // closed since
	}
	if g == nil {
		refuse(w, http.StatusProxyAuthRequired, "egress refused: this proxy serves coderun runs only, with their own credentials (HTTP_PROXY)")
		return
	}
	start := time.Now()
	t, msg := g.admit(r)
	entry := g.begin(t, recordedMethod(r.Method))
	if msg != "" {
		g.finish(entry, http.StatusForbidden, 0, start)
		refuse(w, http.StatusForbidden, msg)
		return
	}
	if r.Method == http.MethodConnect {
		if g.p.opts.CA != nil && g.bound.intercepts(t.host) {
			g.intercept(w, t, entry, start)
		} else {
			g.tunnel(w, t, entry, start)
		}
		return
	}
	if err := g.plainAllowed(t, r); err != nil {
		g.finish(entry, http.StatusForbidden, 0, start)
		refuse(w, http.StatusForbidden, err.Error())
		return
	}
	// Every header block the program reads from the upstream passes sw:
	// 1xx responses and the final one as written, the trailers when the
	// handler returns (the server writes them from w's header then).
	sw := &statusWriter{ResponseWriter: w, redact: func(h http.Header) { g.bound.redact(t.host, h) }}
	if r.Body != nil {
		r.Body = &meteredBody{ReadCloser: r.Body, g: g}
	}
	// The request's own context (the server's, so an upstream failing
	// mid-body aborts the client's response) ends with the grant too.
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), targetKey{}, t))
	stop := context.AfterFunc(g.ctx, cancel)
	defer func() {
		stop()
		cancel()
		sw.redact(w.Header())
		g.finish(entry, sw.status(), sw.n, start)
	}()
	g.rp.ServeHTTP(sw, r.WithContext(ctx))
}

// target is a request's destination once admitted.
type target struct {
	host string // normalised name or address text
	port uint16
	rule Rule
}

type targetKey struct{}

// connKey is the context key of a request's connection to the proxy.
type connKey struct{}

// admit checks r against the grant's budget and policy: its target, or
// the refusal's text (naming the policy, never the request's path).
func (g *Grant) admit(r *http.Request) (target, string) {
	var t target
	if recordedMethod(r.Method) != r.Method {
		return t, "egress refused: the proxy forwards " + strings.Join(proxiedMethods, ", ") + " only"
	}
	hostport, defPort := r.Host, "443"
	if r.Method != http.MethodConnect {
		if r.URL.Scheme != "http" || r.URL.Host == "" {
			return t, "egress refused: the proxy forwards absolute http:// URLs and CONNECT tunnels only"
		}
		if r.Header.Get("Upgrade") != "" {
			return t, "egress refused: protocol upgrades over plain HTTP are not forwarded (use https://)"
		}
		hostport, defPort = r.URL.Host, "80"
	}
	host, port, ok := splitTarget(hostport, defPort)
	if !ok {
		return t, fmt.Sprintf("egress refused: %q is not a host name nor an IP address with a port", hostport)
	}
	t.host, t.port = host, port
	return g.allow(t, r.Method)
}

// allow charges a request to t to the budget and checks the policy: t
// with its rule, or the refusal's text.
func (g *Grant) allow(t target, method string) (target, string) {
	g.mu.Lock()
	g.requests++
	over := g.budget.MaxRequests > 0 && g.requests > g.budget.MaxRequests
	g.mu.Unlock()
	if over {
		return t, fmt.Sprintf("egress refused: the run's budget of %d requests (limits.maxEgressRequests) is spent", g.budget.MaxRequests)
	}
	rule, ok := g.policy.Match(t.host, t.port, method)
	if !ok {
		return t, fmt.Sprintf("egress refused: %s %s is not allowed by the egress policy (allowed: %s)",
			method, net.JoinHostPort(t.host, strconv.Itoa(int(t.port))), allowedText(g.policy))
	}
	t.rule = rule
	return t, ""
}

func allowedText(p *Policy) string {
	if p.Empty() {
		return "nothing"
	}
	return strings.Join(p.Entries(), ", ")
}

// splitTarget reads host[:port] (defPort when absent): an IP literal in
// canonical form, or a normalised name; numeric names are refused.
func splitTarget(hostport, defPort string) (string, uint16, bool) {
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		host, portText = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), defPort
	}
	n, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || n == 0 {
		return "", 0, false
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return "", 0, false
		}
		return a.Unmap().String(), uint16(n), true
	}
	name, ok := Normalize(host)
	if !ok || isNumeric(name) {
		return "", 0, false
	}
	return name, uint16(n), true
}

// dial connects to t: its rule's address, or what its name resolves to,
// skipping every address the rule may not reach.
func (g *Grant) dial(ctx context.Context, t target) (net.Conn, error) {
	addrs, err := g.p.resolve(ctx, t)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: dialTimeout}
	var refused []string
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), t.port)
		if why := g.p.forbidden(ap, t.rule); why != "" {
			refused = append(refused, why)
			continue
		}
		c, err := d.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return c, nil
		}
		refused = append(refused, "connect failed")
	}
	if len(refused) == 0 {
		return nil, fmt.Errorf("%s has no address", t.host)
	}
	return nil, fmt.Errorf("%s: %s", t.host, strings.Join(refused, "; "))
}

// dialFor is the forwarding transport's dialer: the target admitted for the
// request travels in ctx.
func (g *Grant) dialFor(ctx context.Context, _, _ string) (net.Conn, error) {
	t, ok := ctx.Value(targetKey{}).(target)
	if !ok {
		return nil, errors.New("no admitted target")
	}
	return g.dial(ctx, t)
}

func (p *Proxy) resolve(ctx context.Context, t target) ([]netip.Addr, error) {
	if t.rule.Addr.IsValid() {
		return []netip.Addr{t.rule.Addr}, nil
	}
	if a, err := netip.ParseAddr(t.host); err == nil {
		return []netip.Addr{a}, nil
	}
	if a, ok := p.opts.Hosts[t.host]; ok {
		return []netip.Addr{a}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	addrs, err := p.opts.Resolver.LookupNetIP(ctx, "ip", t.host)
	if err != nil {
		return nil, fmt.Errorf("%s does not resolve", t.host)
	}
	return addrs, nil
}

// forbidden says why rule may not reach ap ("" when it may). The proxy
// itself, the forbidden addresses, unspecified and multicast addresses are
// never reached; loopback, private and shared addresses only by a rule
// that names the address or says "private"; link-local ones (cloud
// metadata) only by a rule that names the address.
func (p *Proxy) forbidden(ap netip.AddrPort, rule Rule) string {
	a := ap.Addr()
	switch {
	case ap == p.self || a.IsUnspecified() && ap.Port() == p.self.Port():
		return "the proxy itself"
	case contains(p.opts.Forbidden, ap):
		return "the daemon's own address"
	case a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast():
		return "an unspecified or multicast address"
	case rule.Addr.IsValid():
		if rule.Addr.Unmap() == a {
			return ""
		}
		return "not the rule's address"
	case a.IsLinkLocalUnicast():
		return "a link-local address (name it in the policy by address)"
	case (a.IsLoopback() || a.IsPrivate() || slices.ContainsFunc(embedsIPv4, func(p netip.Prefix) bool { return p.Contains(a) })) && !rule.Private:
		return "a loopback or private address (name it in the policy, or mark the rule \"private\")"
	}
	return ""
}

// embedsIPv4 are ranges treated like private addresses: carrier-grade NAT,
// and IPv6 forms that carry an IPv4 address a gateway may reach (NAT64,
// local-use NAT64, the deprecated IPv4-compatible form).
var embedsIPv4 = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"), netip.MustParsePrefix("::/96")}

func contains(list []netip.AddrPort, ap netip.AddrPort) bool {
	for _, f := range list {
		if f.Port() == ap.Port() && (f.Addr() == ap.Addr() || f.Addr().IsUnspecified()) {
			return true
		}
	}
	return false
}

// tunnel answers CONNECT: it dials t, then relays bytes both ways within
// the budget until either side closes or the grant is revoked.
func (g *Grant) tunnel(w http.ResponseWriter, t target, entry int, start time.Time) {
	up, err := g.dial(g.ctx, t)
	if err != nil {
		g.finish(entry, http.StatusBadGateway, 0, start)
		refuse(w, http.StatusBadGateway, "egress refused: "+err.Error())
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !g.track(up, down) {
		up.Close()
		down.Close()
		return
	}
	_, _ = down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	g.established(entry) // its bytes and time when it ends, if before the run's settlement
	var wg sync.WaitGroup
	var n [2]int64
	wg.Add(2)
	go func() { defer wg.Done(); n[0] = g.relay(up, down, rw.Reader) }() // the program's bytes, buffered ones first
	go func() { defer wg.Done(); n[1] = g.relay(down, up, up) }()
	wg.Wait()
	g.untrack(up, down)
	g.finish(entry, http.StatusOK, n[0]+n[1], start)
}

// relay copies r (what src sends) to dst within the budget. When src ends,
// dst is closed for writing and src for reading, so the other direction
// goes on; when the budget is spent, both connections are closed.
func (g *Grant) relay(dst, src net.Conn, r io.Reader) int64 {
	n, err := io.Copy(dst, &meteredReader{r: r, g: g})
	if errors.Is(err, errBudget) {
		dst.Close()
		src.Close()
		return n
	}
	if c, ok := dst.(*net.TCPConn); ok {
		_ = c.CloseWrite()
	} else {
		dst.Close()
	}
	if c, ok := src.(*net.TCPConn); ok {
		_ = c.CloseRead()
	}
	return n
}

func (g *Grant) track(cs ...net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	for _, c := range cs {
		g.conns[c] = struct{}{}
	}
	return true
}

func (g *Grant) untrack(cs ...net.Conn) {
	g.mu.Lock()
	for _, c := range cs {
		delete(g.conns, c)
		c.Close()
	}
	g.mu.Unlock()
}

// errBudget ends a body or tunnel that would pass limits.maxEgressBytes.
var errBudget = errors.New("egress refused: the run's budget of egress bytes (limits.maxEgressBytes) is spent")

// charge is a read of n bytes (and err) charged to the budget: errBudget
// in its place once the budget is spent.
func (g *Grant) charge(n int, err error) (int, error) {
	if n <= 0 {
		return n, err
	}
	g.mu.Lock()
	g.bytes += int64(n)
	over := g.budget.MaxBytes > 0 && g.bytes > g.budget.MaxBytes
	g.mu.Unlock()
	if over {
		return 0, errBudget
	}
	return n, err
}

type meteredReader struct {
	r io.Reader
	g *Grant
}

func (m *meteredReader) Read(b []byte) (int, error) { return m.g.charge(m.r.Read(b)) }

type meteredBody struct {
	io.ReadCloser
	g *Grant
}

func (m *meteredBody) Read(b []byte) (int, error) { return m.g.charge(m.ReadCloser.Read(b)) }

// meterResponse charges the response body to the budget (its headers are
// redacted as they are written: statusWriter).
func (g *Grant) meterResponse(resp *http.Response) error {
	resp.Body = &meteredBody{ReadCloser: resp.Body, g: g}
	return nil
}

// upstreamError answers a forwarded request that failed upstream: the
// dial's reason (resolution, a refused address, a timeout) or the
// upstream's malformed answer, which may quote the request, secrets
// redacted.
func (g *Grant) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	msg := "egress refused or failed: " + err.Error()
	if t, ok := r.Context().Value(targetKey{}).(target); ok {
		msg = g.bound.redactText(t.host, msg)
	}
	if errors.Is(err, errBudget) {
		msg = errBudget.Error()
	}
	refuse(w, http.StatusBadGateway, msg)
}

// proxiedMethods are the methods the proxy forwards (a rule's methods and
// CONNECT): anything else is refused and recorded as "OTHER", so a
// program cannot fill its audit with long method names.
var proxiedMethods = append(slices.Clone(knownMethods), http.MethodConnect)

func recordedMethod(m string) string {
	if slices.Contains(proxiedMethods, m) {
		return m
	}
	return "OTHER"
}

// maxEntries bounds a run's audit beyond its request budget (refusals past
// the budget are not recorded).
const maxEntries = 10000

// begin reserves a request's audit entry, in the order requests arrive:
// its index, or -1 past the request budget (one refusal past it is kept),
// so a program can flood neither the audit nor the log.
func (g *Grant) begin(t target, method string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || len(g.entries) >= maxEntries ||
		(g.budget.MaxRequests > 0 && int64(len(g.entries)) > g.budget.MaxRequests) {
		return -1
	}
	g.entries = append(g.entries, protocol.EgressEntry{Host: t.host, Port: int(t.port), Method: method})
	return len(g.entries) - 1
}

// established records a tunnel's status once it is open.
func (g *Grant) established(i int) {
	g.mu.Lock()
	if i >= 0 && !g.closed {
		g.entries[i].Status = http.StatusOK
	}
	g.mu.Unlock()
}

// finish completes entry i (status, bytes, milliseconds) and logs it:
// host, port, method, status, bytes, ms; never the path, query or headers.
// An entry the run's settlement closed first keeps status 0 (a tunnel:
// 200 and bytes 0).
func (g *Grant) finish(i int, status int, n int64, start time.Time) {
	if i < 0 {
		return
	}
	ms := time.Since(start).Milliseconds()
	g.mu.Lock()
	e := g.entries[i]
	if !g.closed {
		g.entries[i].Status, g.entries[i].Bytes, g.entries[i].Ms = status, n, ms
	}
	g.mu.Unlock()
	g.p.log.Info("egress", "run", g.run, "host", e.Host, "port", e.Port, "method", e.Method,
		"status", status, "bytes", n, "ms", ms)
}

// refuse answers with status and a plain-text body a program (and the
// model reading its output) can act on.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// statusWriter keeps the final status, counts the body bytes written and
// redacts each header block (1xx ones included) before it is written.
type statusWriter struct {
	http.ResponseWriter
	redact func(http.Header)
	code   int
	n      int64
}

func (s *statusWriter) WriteHeader(code int) {
	s.redact(s.Header())
	if s.code == 0 && code >= 200 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.WriteHeader(http.StatusOK) // the implied header block, redacted too
	}
	n, err := s.ResponseWriter.Write(b)
	s.n += int64(n)
	return n, err
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) status() int {
	if s.code == 0 {
		return http.StatusBadGateway
	}
	return s.code
}
