package egress

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// harness is a proxy, one run's grant and an HTTP client that uses it.
type harness struct {
	p      *Proxy
	g      *Grant
	client *http.Client
}

func newHarness(t *testing.T, policy string, b Budget, hosts map[string]netip.Addr, roots *tls.Config) *harness {
	t.Helper()
	pol, entry, rule := Parse([]byte(policy))
	if rule != "" {
		t.Fatalf("%s: %s", entry, rule)
	}
	p, err := Listen(Options{Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	return openHarness(t, p, pol, nil, b, roots)
}

// openHarness grants pol, bound and b to a new token on p and makes the
// client that uses it (redirects not followed, trusting tlsConf's roots);
// the test's end closes all three.
func openHarness(t *testing.T, p *Proxy, pol *Policy, bound *Bound, b Budget, tlsConf *tls.Config) *harness {
	token := NewToken()
	g := p.Open(token, "r1", pol, bound, b)
	proxyURL := &url.URL{Scheme: "http", User: url.UserPassword(user, token), Host: p.Addr().String()}
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: tlsConf}
	h := &harness{p: p, g: g, client: &http.Client{Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		g.Close()
		p.Close()
	})
	return h
}

func (h *harness) get(t *testing.T, u string) (int, string) {
	t.Helper()
	return h.do(t, u, http.Header{})
}

func upstream(t *testing.T, tlsToo bool, body string) *httptest.Server {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://refused.test/", http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, body)
	})
	var s *httptest.Server
	if tlsToo {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s
}

func port(s *httptest.Server) string { return s.URL[strings.LastIndexByte(s.URL, ':')+1:] }

// TestC802ForwardAndTunnel: an allowed name reaches its upstream over plain
// HTTP and through a CONNECT tunnel; both are audited without their paths.
func TestC802ForwardAndTunnel(t *testing.T) {
	leakcheck.Check(t)
	plain, secure := upstream(t, false, "plain-ok"), upstream(t, true, "tls-ok")
	roots := &tls.Config{RootCAs: secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	lo := netip.MustParseAddr("127.0.0.1")
	h := newHarness(t, `{"allow": [{"host": "plain.test", "ports": [`+port(plain)+`], "private": true},
		{"host": "example.com", "ports": [`+port(secure)+`], "private": true}]}`,
		Budget{}, map[string]netip.Addr{"plain.test": lo, "example.com": lo}, roots)
	if code, body := h.get(t, "http://plain.test:"+port(plain)+"/x?secret=1"); code != 200 || body != "plain-ok" {
		t.Fatalf("plain: %d %q", code, body)
	}
	// httptest's certificate is for example.com.
	if code, body := h.get(t, "https://example.com:"+port(secure)+"/y"); code != 200 || body != "tls-ok" {
		t.Fatalf("tls: %d %q", code, body)
	}
	h.client.Transport.(*http.Transport).CloseIdleConnections()
	entries := waitEntries(t, h.g, 2)
	if e := entries[0]; e.Host != "plain.test" || e.Method != "GET" || e.Status != 200 || e.Bytes != int64(len("plain-ok")) {
		t.Errorf("plain entry %+v", e)
	}
	if e := entries[1]; e.Host != "example.com" || e.Method != "CONNECT" || e.Status != 200 || e.Bytes == 0 {
		t.Errorf("tunnel entry %+v", e)
	}
}

// waitEntries waits for the grant's audit to hold n finished entries (a
// tunnel's is finished when both its directions have ended).
func waitEntries(t *testing.T, g *Grant, n int) []protocolEntry {
	t.Helper()
	for {
		g.mu.Lock()
		got := append([]protocolEntry(nil), g.entries...)
		g.mu.Unlock()
		unfinished := func(e protocolEntry) bool { return e.Status == 0 || e.Method == "CONNECT" && e.Bytes == 0 }
		if len(got) >= n && !slices.ContainsFunc(got[:n], unfinished) {
			return got
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("audit %+v, want %d entries", got, n)
		default:
			waitABit()
		}
	}
}

// TestC803Refusals: what the policy does not allow is refused with a 403
// naming the policy; names and addresses that lead to loopback, private or
// link-local destinations are refused unless the rule says so.
func TestC803Refusals(t *testing.T) {
	leakcheck.Check(t)
	plain := upstream(t, false, "reached")
	p := port(plain)
	lo := netip.MustParseAddr("127.0.0.1")
	h := newHarness(t, `{"allow": ["plain.test:`+p+`", "meta.test:`+p+`", "v6.test:`+p+`", "mapped.test:`+p+`", "compat.test:`+p+`", "nat64.test:`+p+`", "cgnat.test:`+p+`", {"host": "ok.test", "ports": [`+p+`], "private": true, "methods": ["GET"]}]}`,
		Budget{}, map[string]netip.Addr{"plain.test": lo, "ok.test": lo, "refused.test": lo,
			"meta.test": netip.MustParseAddr("169.254.169.254"), "v6.test": netip.MustParseAddr("::1"),
			"mapped.test": netip.MustParseAddr("::ffff:127.0.0.1"), "compat.test": netip.MustParseAddr("::7f00:1"),
			"nat64.test": netip.MustParseAddr("64:ff9b::7f00:1"), "cgnat.test": netip.MustParseAddr("100.64.0.1")}, nil)
	for _, c := range []struct{ url, want string }{
		{"http://refused.test:" + p + "/", "not allowed by the egress policy"},
		{"http://127.0.0.1:" + p + "/", "not allowed by the egress policy"},
		{"http://2130706433:" + p + "/", "not a host name"},
		{"http://0x7f.1:" + p + "/", "not a host name"},
		{"http://[::1]:" + p + "/", "not allowed by the egress policy"},
		{"http://plain.test:" + p + "/", "loopback or private"},
		{"http://meta.test:" + p + "/", "link-local"},
		{"http://v6.test:" + p + "/", "loopback or private"},
		{"http://mapped.test:" + p + "/", "loopback or private"},
		{"http://compat.test:" + p + "/", "loopback or private"},
		{"http://nat64.test:" + p + "/", "loopback or private"},
		{"http://cgnat.test:" + p + "/", "loopback or private"},
		{"http://" + h.p.Addr().String() + "/", "not allowed"},
		{"https://ok.test:" + p + "/", "Forbidden"}, // Go's client keeps only the status of a refused CONNECT
	} {
		code, body := h.get(t, c.url)
		if strings.Contains(body, "reached") || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want a refusal containing %q", c.url, code, body, c.want)
		}
	}
	if code, body := h.get(t, "http://ok.test:"+p+"/redirect"); code != http.StatusFound {
		t.Fatalf("redirect: %d %q", code, body)
	}
	if code, body := h.get(t, "http://refused.test/"); code != http.StatusForbidden || !strings.Contains(body, "allowed: ") {
		t.Fatalf("redirect target: %d %q", code, body)
	}
}

// TestC804Budgets: requests past limits.maxEgressRequests and bodies past
// limits.maxEgressBytes are refused.
func TestC804Budgets(t *testing.T) {
	leakcheck.Check(t)
	big := upstream(t, false, strings.Repeat("x", 1<<20))
	p := port(big)
	h := newHarness(t, `{"allow": ["127.0.0.1:`+p+`"]}`, Budget{MaxRequests: 3, MaxBytes: 1000}, nil, nil)
	if code, body := h.get(t, "http://127.0.0.1:"+p+"/"); len(body) >= 1<<20 {
		t.Fatalf("the whole body passed the byte budget: %d", code)
	}
	h.get(t, "http://127.0.0.1:"+p+"/")
	h.get(t, "http://127.0.0.1:"+p+"/")
	if code, body := h.get(t, "http://127.0.0.1:"+p+"/"); code != http.StatusForbidden || !strings.Contains(body, "maxEgressRequests") {
		t.Fatalf("fourth request: %d %q", code, body)
	}
	// A tunnel is cut past maxEgressBytes too.
	secure := upstream(t, true, strings.Repeat("y", 1<<20))
	roots := &tls.Config{RootCAs: secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	ht := newHarness(t, `{"allow": ["127.0.0.1:`+port(secure)+`"]}`, Budget{MaxBytes: 64 << 10}, nil, roots)
	if code, body := ht.get(t, secure.URL+"/"); code == http.StatusOK && len(body) == 1<<20 {
		t.Fatalf("the whole 1 MiB passed a 64 KiB budget through a tunnel")
	}
}

// TestC805NoToken: a request without a run's credentials, or after its
// grant closed, is refused.
func TestC805NoToken(t *testing.T) {
	leakcheck.Check(t)
	up := upstream(t, false, "reached")
	h := newHarness(t, `{"allow": ["127.0.0.1:`+port(up)+`"]}`, Budget{}, nil, nil)
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: h.p.Addr().String()})}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("without credentials: %d", resp.StatusCode)
	}
	h.g.Close()
	if code, body := h.get(t, up.URL); code != http.StatusProxyAuthRequired {
		t.Fatalf("after the grant closed: %d %q", code, body)
	}
}

type protocolEntry = protocol.EgressEntry

func waitABit() { time.Sleep(time.Millisecond) }

// TestC807Hostile: what a program can put in a request does not pass the
// proxy: its credentials never reach the upstream, a Host header cannot
// redirect an absolute URL, a method outside the list is refused and
// recorded as OTHER, and a slow upstream's response ends when the run's
// grant is closed.
func TestC807Hostile(t *testing.T) {
	leakcheck.Check(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			started <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		_, _ = io.WriteString(w, "host="+r.Host+" auth="+r.Header.Get("Proxy-Authorization"))
	}))
	defer up.Close()
	defer close(release)
	p := port(up)
	h := newHarness(t, `{"allow": [{"host": "plain.test", "ports": [`+p+`], "private": true}]}`,
		Budget{}, map[string]netip.Addr{"plain.test": netip.MustParseAddr("127.0.0.1")}, nil)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+h.g.token))
	raw := func(req string) string {
		c, err := net.Dial("tcp", h.p.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, req)
		b, _ := io.ReadAll(c)
		return string(b)
	}
	got := raw("GET http://plain.test:" + p + "/ HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: " + auth + "\r\nConnection: close\r\n\r\n")
	if !strings.Contains(got, "host=plain.test:"+p+" auth=\n") && !strings.HasSuffix(got, "host=plain.test:"+p+" auth=") {
		t.Errorf("upstream saw: %q", got)
	}
	if got := raw("SMUGGLEDMETHODNAME http://plain.test:" + p + "/ HTTP/1.1\r\nHost: plain.test\r\nProxy-Authorization: " + auth + "\r\nConnection: close\r\n\r\n"); !strings.Contains(got, "403 Forbidden") {
		t.Errorf("odd method: %q", got)
	}
	entries := waitEntries(t, h.g, 2)
	if entries[1].Method != "OTHER" {
		t.Errorf("odd method recorded as %q", entries[1].Method)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := h.client.Get("http://plain.test:" + p + "/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status) // ended before its headers: the proxy's 502
			}
		}
		done <- err
	}()
	<-started
	h.g.Close()
	if err := <-done; err == nil {
		t.Errorf("the slow response ended cleanly (200, whole body) after the grant closed")
	}
}

// TestC817LogBounded: refusals past the request budget are neither audited
// nor logged, so a program cannot flood the daemon's log.
func TestC817LogBounded(t *testing.T) {
	leakcheck.Check(t)
	var logged strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))
	pol, _, _ := Parse([]byte(`{"allow": []}`))
	p, err := Listen(Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	token := NewToken()
	g := p.Open(token, "r1", pol, nil, Budget{MaxRequests: 2})
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", User: url.UserPassword(user, token), Host: p.Addr().String()})}
	defer tr.CloseIdleConnections()
	for range 20 {
		resp, err := (&http.Client{Transport: tr}).Get("http://refused.test/")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	entries := g.Close()
	mu.Lock()
	lines := strings.Count(logged.String(), "msg=egress ")
	mu.Unlock()
	if len(entries) != 3 || lines != 3 {
		t.Errorf("%d entries and %d log lines for 20 refusals under a budget of 2, want 3 and 3", len(entries), lines)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestC1204GrantForgetsClosedConnections: a grant holds the program's
// connections to the proxy (to close them with the run) only while they
// are open: after 50 requests each on a connection of its own, closed,
// it holds none. It held every one until the run ended.
func TestC1204GrantForgetsClosedConnections(t *testing.T) {
	leakcheck.Check(t)
	up := upstream(t, false, "reached")
	h := newHarness(t, `{"allow": ["127.0.0.1:`+port(up)+`"]}`, Budget{}, nil, nil)
	h.client.Transport.(*http.Transport).DisableKeepAlives = true
	for range 50 {
		if code, body := h.get(t, up.URL); code != http.StatusOK {
			t.Fatalf("%d %q", code, body)
		}
	}
	held := func() int {
		h.g.mu.Lock()
		defer h.g.mu.Unlock()
		return len(h.g.conns)
	}
	for deadline := time.Now().Add(time.Minute); held() > 0 && time.Now().Before(deadline); {
		waitABit() // the server sees each close on its own goroutine
	}
	if n := held(); n > 0 {
		t.Errorf("the grant holds %d closed connections", n)
	}
}
