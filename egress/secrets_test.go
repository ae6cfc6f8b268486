package egress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// TestC1000SecretEntries: a file's secrets are read (valueEnv from the
// daemon's environment) and described without values; each invalid entry
// is named with its member and the rule, never with its value.
func TestC1000SecretEntries(t *testing.T) {
	t.Setenv("C1000_KEY", "from-env-value")
	p, entry, rule := Parse([]byte(`{"allow": ["api.example.com", "*.example.org", "10.0.0.1:8080"], "secrets": [
		{"hosts": ["api.example.com"], "header": "Authorization", "value": "Bearer v1"},
		{"hosts": ["x.example.org", "10.0.0.1"], "query": "api_key", "valueEnv": "C1000_KEY"},
		{"hosts": ["*.example.org"], "env": "OPENAI_API_KEY", "value": "sk-1"}]}`))
	if rule != "" {
		t.Fatalf("valid file refused: %s: %s", entry, rule)
	}
	if p.Secrets[1].Value != "from-env-value" {
		t.Errorf("valueEnv not read: %+v", p.Secrets[1])
	}
	want := "header Authorization for api.example.com|query api_key for x.example.org, 10.0.0.1|env OPENAI_API_KEY for *.example.org"
	if got := strings.Join(p.SecretsText(), "|"); got != want {
		t.Errorf("described %q, want %q", got, want)
	}
	const v = `"value": "SECRETVALUE"`
	for _, c := range []struct{ secrets, entry, rule string }{
		{`{}`, "secrets", "must be an array"},
		{`[{"hosts": ["other.example.net"], "header": "A", ` + v + `}]`, "secrets[0].hosts[0]", "not within the egress allow list"},
		{`[{"hosts": ["api.example.com:443"], "header": "A", ` + v + `}]`, "secrets[0].hosts[0]", "has no port"},
		{`[{"hosts": ["*.example.com"], "header": "A", ` + v + `}]`, "secrets[0].hosts[0]", "not within"},
		{`[{"hosts": [], "header": "A", ` + v + `}]`, "secrets[0].hosts", "1 to 64 hosts"},
		{`[{"hosts": ["api.example.com"], ` + v + `}]`, "secrets[0]", "exactly one of \"header\""},
		{`[{"hosts": ["api.example.com"], "header": "A", "env": "B", ` + v + `}]`, "secrets[0]", "exactly one of \"header\""},
		{`[{"hosts": ["api.example.com"], "header": "A"}]`, "secrets[0]", "exactly one of \"value\""},
		{`[{"hosts": ["api.example.com"], "header": "Host", ` + v + `}]`, "secrets[0].header", "reserved"},
		{`[{"hosts": ["api.example.com"], "header": "proxy-authorization", ` + v + `}]`, "secrets[0].header", "reserved"},
		{`[{"hosts": ["api.example.com"], "header": "Content-Length", ` + v + `}]`, "secrets[0].header", "reserved"},
		{`[{"hosts": ["api.example.com"], "header": "A B", ` + v + `}]`, "secrets[0].header", "HTTP header name"},
		{`[{"hosts": ["api.example.com"], "query": "a&b", ` + v + `}]`, "secrets[0].query", "letters, digits"},
		{`[{"hosts": ["api.example.com"], "env": "PATH", ` + v + `}]`, "secrets[0].env", "reserved"},
		{`[{"hosts": ["api.example.com"], "env": "PYTHONPATH", ` + v + `}]`, "secrets[0].env", "reserved"},
		{`[{"hosts": ["api.example.com"], "env": "HTTPS_PROXY", ` + v + `}]`, "secrets[0].env", "reserved"},
		{`[{"hosts": ["api.example.com"], "env": "SSL_CERT_FILE", ` + v + `}]`, "secrets[0].env", "reserved"},
		{`[{"hosts": ["api.example.com"], "env": "lower", ` + v + `}]`, "secrets[0].env", "A-Z"},
		{`[{"hosts": ["api.example.com"], "env": "K", ` + v + `}, {"hosts": ["api.example.com"], "env": "K", ` + v + `}]`, "secrets[1].env", "earlier entry"},
		{`[{"hosts": ["api.example.com"], "header": "A", "value": "SECRET\r\nX: y"}]`, "secrets[0].value", "CR, LF, NUL"},
		{`[{"hosts": ["api.example.com"], "header": "A", "value": "SECRET\u0000"}]`, "secrets[0].value", "CR, LF, NUL"},
		{`[{"hosts": ["api.example.com"], "header": "A", "value": ""}]`, "secrets[0].value", "1 to 8192 bytes"},
		{`[{"hosts": ["api.example.com"], "header": "A", "value": "` + strings.Repeat("S", MaxSecretValue+1) + `"}]`, "secrets[0].value", "1 to 8192 bytes"},
		{`[{"hosts": ["api.example.com"], "header": "A", "valueEnv": "C1000_UNSET"}]`, "secrets[0].valueEnv", "not set"},
		{`[{"hosts": ["api.example.com"], "header": "A", ` + v + `, "extra": 1}]`, "secrets[0]", "must be an object"},
	} {
		_, entry, rule := Parse([]byte(`{"allow": ["api.example.com"], "secrets": ` + c.secrets + `}`))
		if entry != c.entry || !strings.Contains(rule, c.rule) {
			t.Errorf("%s: got %q %q, want %q containing %q", c.secrets, entry, rule, c.entry, c.rule)
		}
		if strings.Contains(rule, "SECRET") {
			t.Errorf("%s: the rule shows the value: %q", c.secrets, rule)
		}
	}
	// A client's secrets cannot read the daemon's environment.
	_, err := ParseSecrets([]byte(`[{"hosts": ["api.example.com"], "header": "A", "valueEnv": "C1000_KEY"}]`), "secrets", p, nil)
	if err == nil || !strings.Contains(err.Error(), "secrets[0].valueEnv") {
		t.Errorf("valueEnv from a client: %v", err)
	}
}

// echo is an upstream that answers with the request's headers and query as
// JSON.
func echo(t *testing.T, tlsToo bool) *httptest.Server {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"header": r.Header, "query": r.URL.RawQuery, "host": r.Host})
	})
	s := httptest.NewUnstartedServer(h)
	if tlsToo {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// secretHarness is a proxy with a CA, one run's grant with the policy's
// secrets bound, and a client trusting the CA.
func secretHarness(t *testing.T, policy string, hosts map[string]netip.Addr, upstreamRoots *x509.CertPool) (*harness, *Bound) {
	t.Helper()
	pol, entry, rule := Parse([]byte(policy))
	if rule != "" {
		t.Fatalf("%s: %s", entry, rule)
	}
	ca, err := NewCA(pol)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Listen(Options{Hosts: hosts, CA: ca, UpstreamRoots: upstreamRoots})
	if err != nil {
		t.Fatal(err)
	}
	bound := Bind(pol.Secrets)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM())
	return openHarness(t, p, pol, bound, Budget{}, &tls.Config{RootCAs: roots}), bound
}

func (h *harness) do(t *testing.T, u string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestC1001SecretsPlainHTTP: over plain HTTP a header secret and a query
// secret reach their bound host only; an env secret's placeholder is
// replaced for its bound host and refused (403, audited) to another.
func TestC1001SecretsPlainHTTP(t *testing.T) {
	leakcheck.Check(t)
	up := echo(t, false)
	pt := port(up)
	lo := netip.MustParseAddr("127.0.0.1")
	h, bound := secretHarness(t, `{"allow": [{"host": "bound.test", "ports": [`+pt+`], "private": true},
		{"host": "other.test", "ports": [`+pt+`], "private": true}], "secrets": [
		{"hosts": ["bound.test"], "header": "Authorization", "value": "Bearer HEADER-SECRET"},
		{"hosts": ["bound.test"], "query": "api_key", "value": "QUERY SECRET&x"},
		{"hosts": ["bound.test"], "env": "TOKEN", "value": "ENV-SECRET"}]}`,
		map[string]netip.Addr{"bound.test": lo, "other.test": lo}, nil)
	env := bound.Env()
	if len(env) != 1 || !strings.HasPrefix(env[0], "TOKEN="+placeholderPrefix) || strings.Contains(env[0], "ENV-SECRET") {
		t.Fatalf("env %q", env)
	}
	ph := strings.TrimPrefix(env[0], "TOKEN=")
	code, body := h.do(t, "http://bound.test:"+pt+"/p?q="+ph+"&api_key=mine", http.Header{
		"X-Token": {"token " + ph}, "Authorization": {"Bearer program-own"}, "authorization": {"x"}})
	if code != 200 {
		t.Fatalf("bound: %d %s", code, body)
	}
	for _, want := range []string{`"Authorization":["Bearer HEADER-SECRET"]`, `"X-Token":["token ENV-SECRET"]`,
		`api_key=QUERY+SECRET%26x`, `q=` + ph} {
		if !strings.Contains(body, want) {
			t.Errorf("bound request lacks %s: %s", want, body)
		}
	}
	if strings.Count(body, ph) != 1 || strings.Contains(body, "program-own") || strings.Contains(body, "mine") ||
		strings.Contains(body, "q=ENV-SECRET") {
		t.Errorf("bound request kept the program's placeholder in a header or values, or had one replaced in its query: %s", body)
	}
	code, body = h.do(t, "http://other.test:"+pt+"/", http.Header{})
	if code != 200 || strings.Contains(body, "SECRET") {
		t.Errorf("unbound host got a secret: %d %s", code, body)
	}
	for _, c := range []struct {
		url    string
		header http.Header
	}{
		{"http://other.test:" + pt + "/", http.Header{"X-Token": {ph}}},
		{"http://other.test:" + pt + "/?k=" + ph, http.Header{}},
		{"http://other.test:" + pt + "/" + ph, http.Header{}},
	} {
		if code, body := h.do(t, c.url, c.header); code != 403 || !strings.Contains(body, "placeholder") {
			t.Errorf("%s %v: %d %s", c.url, c.header, code, body)
		}
	}
	entries := waitEntries(t, h.g, 5)
	if e := entries[2]; e.Host != "other.test" || e.Status != 403 {
		t.Errorf("refusal audited as %+v", e)
	}
}

// TestC1002SecretsIntercepted: HTTPS to a bound host is intercepted with a
// leaf of the daemon's CA; the secrets are added and the upstream verified
// against the daemon's roots (an untrusted upstream is refused with a
// clear error); a request whose Host is not the tunnel's is refused;
// HTTPS to other hosts is tunnelled, not intercepted.
func TestC1002SecretsIntercepted(t *testing.T) {
	leakcheck.Check(t)
	up := echo(t, true)
	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler())
	other, err := NewCA(&Policy{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := other.leaf("bad.example.com")
	if err != nil {
		t.Fatal(err)
	}
	untrusted.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	lo := netip.MustParseAddr("127.0.0.1")
	h, bound := secretHarness(t, `{"allow": [{"host": "example.com", "ports": [`+port(up)+`,`+port(untrusted)+`], "private": true},
		{"host": "bad.example.com", "ports": [`+port(untrusted)+`], "private": true}], "secrets": [
		{"hosts": ["example.com", "bad.example.com"], "header": "X-Api-Key", "value": "TLS-SECRET"},
		{"hosts": ["example.com"], "env": "TOKEN", "value": "ENV-SECRET"}]}`,
		map[string]netip.Addr{"example.com": lo, "bad.example.com": lo}, roots)
	ph := strings.TrimPrefix(bound.Env()[0], "TOKEN=")
	code, body := h.do(t, "https://example.com:"+port(up)+"/x?t="+ph, http.Header{"Authorization": {"Bearer " + ph}})
	if code != 200 || !strings.Contains(body, `"X-Api-Key":["TLS-SECRET"]`) || !strings.Contains(body, `"Bearer ENV-SECRET"`) ||
		!strings.Contains(body, `t=`+ph) {
		t.Fatalf("intercepted: %d %s", code, body)
	}
	// A second request on the same (kept-alive) tunnel is forwarded too.
	if code, body := h.do(t, "https://example.com:"+port(up)+"/again", http.Header{}); code != 200 || !strings.Contains(body, `"X-Api-Key":["TLS-SECRET"]`) {
		t.Fatalf("second request in the tunnel: %d %s", code, body)
	}
	// The second upstream's certificate is another CA's.
	code, body = h.do(t, "https://bad.example.com:"+port(untrusted)+"/", http.Header{})
	if code != 502 || !strings.Contains(body, "certificate") {
		t.Errorf("untrusted upstream: %d %s", code, body)
	}
	h.client.Transport.(*http.Transport).CloseIdleConnections()
	entries := waitEntries(t, h.g, 3)
	var methods []string
	for _, e := range entries[:3] {
		methods = append(methods, e.Method+" "+e.Host+" "+strconv.Itoa(e.Status))
	}
	// One tunnel, two requests in it.
	if got := strings.Join(methods, ","); got != "CONNECT example.com 200,GET example.com 200,GET example.com 200" {
		t.Errorf("audit %s (all: %+v)", got, entries)
	}
}

// TestC1003InterceptHostMismatch: inside a tunnel to a bound host, a
// request naming another Host (domain fronting) is refused.
func TestC1003InterceptHostMismatch(t *testing.T) {
	leakcheck.Check(t)
	up := echo(t, true)
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	lo := netip.MustParseAddr("127.0.0.1")
	h, _ := secretHarness(t, `{"allow": [{"host": "example.com", "ports": [`+port(up)+`], "private": true},
		{"host": "other.example.net", "ports": [`+port(up)+`], "private": true}], "secrets": [
		{"hosts": ["example.com"], "header": "X-Api-Key", "value": "TLS-SECRET"}]}`,
		map[string]netip.Addr{"example.com": lo, "other.example.net": lo}, roots)
	req, _ := http.NewRequest("GET", "https://example.com:"+port(up)+"/", nil)
	req.Host = "other.example.net:" + port(up)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "Host is not the tunnel's") || strings.Contains(string(b), "TLS-SECRET") {
		t.Errorf("fronted request: %d %s", resp.StatusCode, b)
	}
}

// FuzzSecretsApply: for any header value and query, check and inject never
// panic; a request to the bound host leaves no placeholder of a bound
// secret in its headers and never puts the value in its query; a
// placeholder to another host is refused.
func FuzzSecretsApply(f *testing.F) {
	f.Add("Bearer PH", "a=PH&b=c", true)
	f.Add("PHPH", "%zz;PH", false)
	f.Fuzz(func(t *testing.T, hv, query string, toBound bool) {
		allow := &Policy{Rules: []Rule{{Host: "bound.test", Ports: defaultPorts}, {Host: "other.test", Ports: defaultPorts}}}
		secrets, err := ParseSecrets([]byte(`[{"hosts": ["bound.test"], "env": "TOKEN", "value": "ENVVALUE"},
			{"hosts": ["bound.test"], "query": "k", "value": "Q"}]`), "secrets", allow, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := Bind(secrets)
		ph := b.placeholders[0]
		hv, query = strings.ReplaceAll(hv, "PH", ph), strings.ReplaceAll(query, "PH", ph)
		host := map[bool]string{true: "bound.test", false: "other.test"}[toBound]
		header := http.Header{"X": {hv}}
		err = b.check(host, "/?"+query, header)
		if !toBound {
			if (err != nil) != (strings.Contains(hv, ph) || strings.Contains(query, ph)) {
				t.Fatalf("check to another host: %v for %q %q", err, hv, query)
			}
			return
		}
		if err != nil {
			t.Fatalf("check to the bound host: %v", err)
		}
		sent := query
		b.inject(host, header, &query)
		if strings.Contains(header.Get("X"), ph) || strings.Contains(query, "ENVVALUE") && !strings.Contains(sent, "ENVVALUE") {
			t.Fatalf("a placeholder is left in a header, or the value put in the query: %q %q", header.Get("X"), query)
		}
	})
}

// FuzzSecretEntries: for any text, ParseSecrets never panics and what it
// accepts has exactly one kind, valid names and a valid value; an entry
// whose value holds a DEL (so is refused) is refused without the value in
// the error (no template holds a DEL).
func FuzzSecretEntries(f *testing.F) {
	f.Add([]byte(`[{"hosts": ["api.example.com"], "header": "Authorization", "value": "Bearer v"}]`), "Bearer v")
	f.Add([]byte(`[{"hosts": ["*.example.org"], "env": "K", "value": "v\r\n"}]`), "x")
	f.Add([]byte(`[{"hosts": ["10.0.0.1"], "query": "k", "value": " v"}]`), "")
	allow := &Policy{Rules: []Rule{{Host: "api.example.com", Ports: defaultPorts}, {Host: "example.org", Wildcard: true, Ports: defaultPorts},
		{Host: "10.0.0.1", Addr: netip.MustParseAddr("10.0.0.1"), Ports: defaultPorts}}}
	f.Fuzz(func(t *testing.T, raw []byte, value string) {
		secrets, err := ParseSecrets(raw, "secrets", allow, nil)
		for _, s := range secrets {
			kinds := 0
			for _, n := range []string{s.Header, s.Query, s.Env} {
				if n != "" {
					kinds++
				}
			}
			if err != nil || kinds != 1 || checkValue(s.Value) != nil || len(s.Hosts) == 0 ||
				s.Header != "" && checkHeaderName(s.Header) != nil || s.Env != "" && checkEnvName(s.Env) != nil {
				t.Fatalf("accepted an invalid secret %+v", s)
			}
		}
		entry, _ := json.Marshal([]map[string]any{{"hosts": []string{"api.example.com"}, "header": "X", "value": value + "\x7f"}})
		_, err = ParseSecrets(entry, "secrets", allow, nil)
		if err == nil || strings.Contains(err.Error(), "\x7f") {
			t.Fatalf("a value with DEL: %v", err)
		}
	})
}

// TestC1007SecretsRedactedFromResponses: a bound upstream that redirects
// keeping the query (the query secret in Location) and reflects headers in
// its response headers: over plain HTTP and intercepted HTTPS the program
// sees placeholders or the redaction mark, never a value.
func TestC1007SecretsRedactedFromResponses(t *testing.T) {
	leakcheck.Check(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("Authorization")+"|"+r.Header.Get("X-Token"))
		http.Redirect(w, r, "https://elsewhere.example/next?"+r.URL.RawQuery, http.StatusFound)
	})
	plain, secure := httptest.NewServer(h), httptest.NewTLSServer(h)
	defer plain.Close()
	defer secure.Close()
	roots := x509.NewCertPool()
	roots.AddCert(secure.Certificate())
	lo := netip.MustParseAddr("127.0.0.1")
	hc, bound := secretHarness(t, `{"allow": [{"host": "bound.test", "ports": [`+port(plain)+`], "private": true},
		{"host": "example.com", "ports": [`+port(secure)+`], "private": true}], "secrets": [
		{"hosts": ["bound.test", "example.com"], "header": "Authorization", "value": "Bearer HDR/SECRET"},
		{"hosts": ["bound.test", "example.com"], "query": "key", "value": "QRY SECRET&"},
		{"hosts": ["bound.test", "example.com"], "env": "TOKEN", "value": "ENV-SECRET"}]}`,
		map[string]netip.Addr{"bound.test": lo, "example.com": lo}, roots)
	ph := strings.TrimPrefix(bound.Env()[0], "TOKEN=")
	for _, u := range []string{"http://bound.test:" + port(plain) + "/", "https://example.com:" + port(secure) + "/"} {
		req, _ := http.NewRequest("GET", u+"?t="+ph, nil)
		req.Header.Set("X-Token", ph)
		resp, err := hc.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("Location") + " " + resp.Header.Get("X-Echo")
		if strings.Contains(got, "SECRET") || !strings.Contains(got, "t="+ph) || !strings.Contains(got, "|"+ph) ||
			!strings.Contains(got, "key="+redactedValue) {
			t.Errorf("%s: the program sees %q", u, got)
		}
	}
}

// TestC1009LeavesVerifyInPython: CPython's ssl (OpenSSL) accepts the
// leaves the CA mints for a name and for an address of its allow list, and
// refuses one for a name outside it (the CA's name constraints). The
// address leaf carried its address as common name, which OpenSSL checked
// against the DNS constraints: "permitted subtree violation".
func TestC1009LeavesVerifyInPython(t *testing.T) {
	leakcheck.Check(t)
	pol, entry, rule := Parse([]byte(`{"allow": ["example.com", "127.0.0.1:9"]}`))
	if rule != "" {
		t.Fatalf("%s: %s", entry, rule)
	}
	ca, err := NewCA(pol)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host string
		ok   bool
	}{{"example.com", true}, {"127.0.0.1", true}, {"evil.test", false}} {
		leaf, err := ca.leaf(c.host)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*leaf}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if conn, err := ln.Accept(); err == nil {
				_ = conn.(*tls.Conn).Handshake()
				conn.Close()
			}
		}()
		out, err := exec.Command("python3", "-c", `import ssl, socket, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
try:
    ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=30), server_hostname=sys.argv[3]).close()
    print("verified")
except ssl.SSLCertVerificationError as e:
    print("refused:", e.verify_message)`, caFile, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), c.host).CombinedOutput()
		ln.Close()
		<-done
		if err != nil || strings.HasPrefix(string(out), "verified") != c.ok {
			t.Errorf("%s: %v %s", c.host, err, out)
		}
	}
}

// TestC1019InterceptHeaderBound: inside an intercepted tunnel a request
// whose headers never end is cut at the proxy's header bound: the tunnel
// closes having read well under the 4 MiB sent (without the bound the
// proxy read until the run's byte budget).
func TestC1019InterceptHeaderBound(t *testing.T) {
	leakcheck.Check(t)
	up := echo(t, true)
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	h, _ := secretHarness(t, `{"allow": [{"host": "example.com", "ports": [`+port(up)+`], "private": true}], "secrets": [
		{"hosts": ["example.com"], "header": "X-Api-Key", "value": "V"}]}`,
		map[string]netip.Addr{"example.com": netip.MustParseAddr("127.0.0.1")}, roots)
	conn, err := net.Dial("tcp", h.p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + h.g.token))
	_, _ = io.WriteString(conn, "CONNECT example.com:"+port(up)+" HTTP/1.1\r\nHost: example.com:"+port(up)+"\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n")
	status := make([]byte, len("HTTP/1.1 200"))
	if _, err := io.ReadFull(conn, status); err != nil || string(status) != "HTTP/1.1 200" {
		t.Fatalf("CONNECT: %q %v", status, err)
	}
	_, _ = io.ReadFull(conn, make([]byte, len(" Connection established\r\n\r\n")))
	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(h.p.CA().PEM())
	tc := tls.Client(conn, &tls.Config{ServerName: "example.com", RootCAs: caPool})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(tc, "GET / HTTP/1.1\r\nHost: example.com:"+port(up)+"\r\nX-Long: ")
	chunk := strings.Repeat("a", 64<<10)
	for range 64 {
		if _, err := io.WriteString(tc, chunk); err != nil {
			break // the proxy closed the tunnel
		}
	}
	_, _ = io.Copy(io.Discard, tc)
	h.g.mu.Lock()
	read := h.g.bytes
	h.g.mu.Unlock()
	if read > 1<<20 {
		t.Errorf("the proxy read %d bytes of an endless header", read)
	}
}

// TestC1018SecretsNotInClearText: a public host with a secret is refused
// over plain HTTP (the secret would cross the network in clear text) with
// a 403 that says to use https://; before, the proxy sent it.
func TestC1018SecretsNotInClearText(t *testing.T) {
	leakcheck.Check(t)
	h, _ := secretHarness(t, `{"allow": ["api.example.com"], "secrets": [
		{"hosts": ["api.example.com"], "header": "Authorization", "value": "Bearer V"}]}`,
		map[string]netip.Addr{"api.example.com": netip.MustParseAddr("192.0.2.1")}, nil)
	code, body := h.do(t, "http://api.example.com/", http.Header{})
	if code != 403 || !strings.Contains(body, "api.example.com has secrets, which the proxy sends over HTTPS only") {
		t.Errorf("plain HTTP to a public host with a secret: %d %s", code, body)
	}
}
