package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// rawProxyProgram speaks HTTP/1.1 to the run's proxy over a socket, so
// that the run sees every byte the proxy answers (1xx responses and
// trailers included, which urllib hides): a plain GET of PLAIN, and GETs
// of / and of each path of MORE at SECURE through a CONNECT tunnel
// verified with the run's trust (SSL_CERT_FILE). It returns the answers as
// text.
const rawProxyProgram = `import base64, os, socket, ssl, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = "Proxy-Authorization: Basic " + base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode() + "\r\n"
def read_all(s):
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data.decode(errors="replace")
def plain(url):
    host = urllib.parse.urlsplit(url).netloc
    with socket.create_connection((proxy.hostname, proxy.port), timeout=30) as s:
        s.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n".encode())
        return read_all(s)
def secure(hostport, path="/"):
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=30)
    s.sendall(f"CONNECT {hostport} HTTP/1.1\r\nHost: {hostport}\r\n{auth}\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    ctx = ssl.create_default_context()
    with ctx.wrap_socket(s, server_hostname=hostport.rsplit(":", 1)[0]) as t:
        t.sendall(f"GET {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n".encode())
        return read_all(t)
return [plain(PLAIN), secure(SECURE)] + [secure(SECURE, path) for path in MORE]
`

// echoAroundBody is a bound upstream that reflects the request's
// Authorization outside the response's header fields: in a 103 Early Hints
// response before them and in a trailer after the body; at /reason, in
// its status line's reason phrase.
func echoAroundBody() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if r.URL.Path == "/reason" {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_, _ = c.Write([]byte("HTTP/1.1 200 " + auth + "\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
				c.Close()
			}
			return
		}
		w.Header().Set("X-Hint", auth)
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("X-Hint")
		w.Header().Set("Trailer", "X-Echo")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
		w.Header().Set("X-Echo", auth)
	})
}

// TestC1200EgressSecretsEchoedOutsideHeaders: a bound upstream that echoes
// a header secret in a 1xx response, a trailer or (intercepted) its reason
// phrase shows the program no value, over plain HTTP (a "private" entry) nor through an intercepted
// tunnel: the proxy rewrites those as it does the response's headers. It
// forwarded both unchanged, the value in the run's result (and audited the
// plain request with the 103's status).
func TestC1200EgressSecretsEchoedOutsideHeaders(t *testing.T) {
	leakcheck.Check(t)
	plain := httptest.NewServer(echoAroundBody())
	defer plain.Close()
	secure := httptest.NewTLSServer(echoAroundBody()) // its certificate is for example.com
	defer secure.Close()
	pp, sp := portOf(plain.URL), portOf(secure.URL)
	policy := `{"allow": [{"host": "plain.test", "ports": [` + pp + `], "private": true},
		{"host": "example.com", "ports": [` + sp + `], "private": true}],
	  "secrets": [{"hosts": ["plain.test", "example.com"], "header": "Authorization", "value": "Bearer ECHO-SECRET-C1200"}]}`
	env := trustingEnv(t, policy)
	d := started(t, env)
	prog, _ := json.Marshal(`PLAIN, SECURE, MORE = "http://plain.test:` + pp + `/", "example.com:` + sp + `", ["/reason"]` + "\n" + rawProxyProgram)
	r, raw := d.egressRun(t, `{"program":`+string(prog)+`}`)
	var got []string
	if err := json.Unmarshal(r.Value, &got); err != nil || len(got) != 3 {
		t.Fatalf("run: %s", raw)
	}
	if !strings.HasPrefix(got[2], "HTTP/1.1 200 coderun-secret-redacted\r\n") {
		t.Errorf("intercepted: the reason phrase is not redacted:\n%s", got[2])
	}
	if !strings.Contains(got[0], "X-Hint: coderun-secret-redacted") || !strings.Contains(got[0], "X-Echo: coderun-secret-redacted") {
		t.Errorf("plain HTTP: the 1xx or the trailer is not the redaction mark:\n%s", got[0])
	}
	if !strings.Contains(got[1], "X-Echo: coderun-secret-redacted") {
		t.Errorf("intercepted: the trailer is not the redaction mark:\n%s", got[1])
	}
	if len(r.Egress) != 5 || r.Egress[0].Status != 200 {
		t.Errorf("audit (the plain request's status is its final one): %+v", r.Egress)
	}
	if strings.Contains(raw, "ECHO-SECRET") || strings.Contains(d.stderr.String(), "ECHO-SECRET") {
		t.Errorf("the secret's value shows in the result or the log:\n%s", raw)
	}
}

// answerMalformed is a bound upstream that is no HTTP server: it answers
// with a line quoting the request's query (as a service of another
// protocol quoting the command it refuses does).
func answerMalformed() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("-ERR,unknown-command,args:" + r.URL.RawQuery + "\r\n\r\n"))
	})
}

// TestC1201EgressSecretsInUpstreamErrors: a bound upstream answering
// something that is not HTTP, quoting the request, shows the program no
// value in the proxy's 502, over plain HTTP nor through an intercepted
// tunnel. The proxy's reason quoted the upstream's line, query secret and
// all.
func TestC1201EgressSecretsInUpstreamErrors(t *testing.T) {
	leakcheck.Check(t)
	plain := httptest.NewServer(answerMalformed())
	defer plain.Close()
	secure := httptest.NewTLSServer(answerMalformed())
	defer secure.Close()
	pp, sp := portOf(plain.URL), portOf(secure.URL)
	policy := `{"allow": [{"host": "plain.test", "ports": [` + pp + `], "private": true},
		{"host": "example.com", "ports": [` + sp + `], "private": true}],
	  "secrets": [{"hosts": ["plain.test", "example.com"], "query": "key", "value": "QRY-SECRET-C1201"}]}`
	env := trustingEnv(t, policy)
	d := started(t, env)
	prog, _ := json.Marshal(`PLAIN, SECURE, MORE = "http://plain.test:` + pp + `/", "example.com:` + sp + `", []` + "\n" + rawProxyProgram)
	r, raw := d.egressRun(t, `{"program":`+string(prog)+`}`)
	var got []string
	if err := json.Unmarshal(r.Value, &got); err != nil || len(got) != 2 {
		t.Fatalf("run: %s", raw)
	}
	for i, answer := range got {
		if !strings.HasPrefix(answer, "HTTP/1.1 502") || !strings.Contains(answer, "key=coderun-secret-redacted") {
			t.Errorf("answer %d is not a 502 with the redaction mark:\n%s", i, answer)
		}
	}
	if strings.Contains(raw, "QRY-SECRET") || strings.Contains(d.stderr.String(), "QRY-SECRET") {
		t.Errorf("the secret's value shows in the result or the log:\n%s", raw)
	}
}

// probeProgram sends each raw PROBES entry, [tunnel, bytes], to the run's
// proxy: with tunnel "" the bytes go to the proxy itself (after the
// credentials line is put in place of {AUTH}); otherwise through a
// CONNECT to tunnel, in TLS verified with the run's trust. {PH} and {OTHER}
// are the env secrets' placeholders. It returns each answer's text.
const probeProgram = `import base64, os, socket, ssl, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = "Proxy-Authorization: Basic " + base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode() + "\r\n"
def read_all(s):
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except (ConnectionError, ssl.SSLError) as e:
        data += f"[{type(e).__name__}]".encode()
    return data.decode(errors="replace")
def fill(text):
    return text.replace("{AUTH}", auth).replace("{PH}", os.environ["SVC_TOKEN"]).replace("{OTHER}", os.environ["OTHER_TOKEN"]).encode()
def probe(tunnel, text):
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=30)
    if not tunnel:
        s.sendall(fill(text))
        with s:
            return read_all(s)
    s.sendall(f"CONNECT {tunnel} HTTP/1.1\r\nHost: {tunnel}\r\n{auth}\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    with ssl.create_default_context().wrap_socket(s, server_hostname=tunnel.rsplit(":", 1)[0]) as t:
        t.sendall(fill(text))
        return read_all(t)
return [probe(tunnel, text) for tunnel, text in PROBES]
`

// TestC1202EgressSecretsRawProbes: hand-made requests to the proxy from a
// hostile run, each answered as the policy says and none carrying a secret
// or a placeholder where it must not go: numeric and mapped IP literals in
// CONNECT; pipelined requests in an intercepted tunnel, the second for
// another host; a placeholder of another host's secret split by obs-fold
// and in Proxy-Authorization inside the tunnel; an absolute-form request
// whose Host header names the bound host; two runs' placeholders (each its
// own, 128 random bits); a CONNECT inside an intercepted
// tunnel (it was forwarded to the bound host, secret added, and its 200
// made the upstream's connection a raw stream to the program).
func TestC1202EgressSecretsRawProbes(t *testing.T) {
	leakcheck.Check(t)
	var mu sync.Mutex
	var got []string
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, strings.Join([]string{r.Host, r.URL.Path, "auth=" + r.Header.Get("Authorization"),
			"token=" + r.Header.Get("X-Token"), "proxy=" + r.Header.Get("Proxy-Authorization")}, " "))
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	})
	secure := httptest.NewTLSServer(record) // its certificate is for example.com
	defer secure.Close()
	plain := httptest.NewServer(record)
	defer plain.Close()
	sp, pp := portOf(secure.URL), portOf(plain.URL)
	policy := `{"allow": [{"host": "example.com", "ports": [` + sp + `], "private": true},
		{"host": "plain.test", "ports": [` + pp + `], "private": true},
		{"host": "lo.test", "ports": [` + pp + `], "private": true}],
	  "secrets": [{"hosts": ["example.com"], "header": "Authorization", "value": "Bearer RAW-SECRET-C1202"},
		{"hosts": ["example.com"], "env": "SVC_TOKEN", "value": "RAW-ENV-C1202"},
		{"hosts": ["plain.test"], "env": "OTHER_TOKEN", "value": "RAW-OTHER-C1202"}]}`
	env := trustingEnv(t, policy)
	d := started(t, env)
	ex, lo := "example.com:"+sp, "lo.test:"+pp
	probes := [][2]string{
		{"", "CONNECT 2130706433:443 HTTP/1.1\r\nHost: 2130706433:443\r\n{AUTH}\r\n"},
		{"", "CONNECT 0177.0.0.1:" + sp + " HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n"},
		{"", "CONNECT [::ffff:127.0.0.1]:" + sp + " HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n"},
		{ex, "GET /first HTTP/1.1\r\nHost: " + ex + "\r\nX-Token: {PH}\r\n\r\nGET /second HTTP/1.1\r\nHost: " + lo + "\r\n\r\n"},
		{ex, "GET /folded HTTP/1.1\r\nHost: " + ex + "\r\nX-Token: tok\r\n {OTHER}\r\nConnection: close\r\n\r\n"},
		{ex, "GET /proxyauth HTTP/1.1\r\nHost: " + ex + "\r\nProxy-Authorization: Basic {OTHER}\r\nConnection: close\r\n\r\n"},
		{ex, "GET /own-proxyauth HTTP/1.1\r\nHost: " + ex + "\r\n{AUTH}Connection: close\r\n\r\n"},
		{"", "GET http://" + lo + "/absolute HTTP/1.1\r\nHost: " + ex + "\r\n{AUTH}Connection: close\r\n\r\n"},
		{ex, "CONNECT " + ex + " HTTP/1.1\r\nHost: " + ex + "\r\n\r\n"},
	}
	raw, _ := json.Marshal(probes)
	prog, _ := json.Marshal("PROBES = " + string(raw) + "\n" + probeProgram)
	r, result := d.egressRun(t, `{"program":`+string(prog)+`}`)
	var answers []string
	if err := json.Unmarshal(r.Value, &answers); err != nil || len(answers) != len(probes) {
		t.Fatalf("run: %s", result)
	}
	status := func(a string) string { return strings.SplitN(a+"   ", " ", 3)[1] }
	for i, want := range []string{"403", "403", "403"} {
		if status(answers[i]) != want {
			t.Errorf("probe %d: %q, want %s", i, answers[i], want)
		}
	}
	if status(answers[3]) != "200" || strings.Count(answers[3], "HTTP/1.1 403") != 1 {
		t.Errorf("pipelined: %q, want 200 then 403", answers[3])
	}
	if a := answers[4]; status(a) != "403" || !strings.Contains(a, "placeholder") {
		t.Errorf("obs-folded placeholder of another host: %q", a)
	}
	if status(answers[5]) != "403" || !strings.Contains(answers[5], "placeholder") || status(answers[6]) != "200" || status(answers[7]) != "200" {
		t.Errorf("Proxy-Authorization in the tunnel, or absolute-form: %q %q %q", answers[5], answers[6], answers[7])
	}
	if a := answers[8]; status(a) != "403" || !strings.Contains(a, "CONNECT") {
		t.Errorf("CONNECT inside an intercepted tunnel: %q", a)
	}
	mu.Lock()
	seen := strings.Join(got, "\n")
	mu.Unlock()
	want := strings.Join([]string{
		ex + " /first auth=Bearer RAW-SECRET-C1202 token=RAW-ENV-C1202 proxy=",
		ex + " /own-proxyauth auth=Bearer RAW-SECRET-C1202 token= proxy=",
		lo + " /absolute auth= token= proxy=",
	}, "\n")
	if seen != want {
		t.Errorf("the upstreams received:\n%s\nwant:\n%s", seen, want)
	}
	if strings.Contains(result, "RAW-") || strings.Contains(d.stderr.String(), "RAW-") {
		t.Errorf("a secret's value shows in the result or the log:\n%s", result)
	}
	// Each run has placeholders of its own: 128 random bits in hex.
	var seenPH []string
	for range 2 {
		r, raw := d.egressRun(t, `{"program":"import os\nreturn os.environ['SVC_TOKEN']"}`)
		var ph string
		if err := json.Unmarshal(r.Value, &ph); err != nil || !regexp.MustCompile(`^coderun-placeholder-[0-9a-f]{32}$`).MatchString(ph) {
			t.Fatalf("a run's placeholder: %s", raw)
		}
		seenPH = append(seenPH, ph)
	}
	if seenPH[0] == seenPH[1] {
		t.Errorf("two runs share the placeholder %s", seenPH[0])
	}
}

// holdProgram opens N keep-alive connections to the run's proxy, sends one
// allowed GET (URL) on each and keeps them (builtins._held) for the
// session's next run; checkHeldProgram then waits for each to end: how
// many the proxy closed and how many stayed open.
const holdProgram = `import base64, builtins, os, socket, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
held = []
for _ in range(N):
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=30)
    s.sendall(f"GET {URL} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode())
    answer = b""
    while not answer.endswith(b"ok"):
        answer += s.recv(4096)
    held.append(s)
builtins._held = held
return len(held)
`

const checkHeldProgram = `import builtins, select, time
pending, closed = list(builtins._held), 0
deadline = time.monotonic() + 30
while pending and time.monotonic() < deadline:
    ready, _, _ = select.select(pending, [], [], max(0, deadline - time.monotonic()))
    for s in ready:
        pending.remove(s)
        try:
            closed += s.recv(1) == b""
        except OSError:
            closed += 1
return [closed, len(pending)]
`

// TestC1203EgressIdleConnectionsEndWithTheRun: a session's run that leaves
// keep-alive connections to the proxy idle (as many as a listener serves
// at once) loses them when its run ends, so that they neither hold the
// proxy's descriptors nor, in tier process where every run shares the
// proxy's loopback listener, keep other runs' requests waiting. They
// stayed open for the session's life: a fresh run's request waited in
// the accept queue.
func TestC1203EgressIdleConnectionsEndWithTheRun(t *testing.T) {
	leakcheck.Check(t)
	_, pp, env := plainSecretUpstream(t, "")
	d := started(t, env)
	sid := d.open(`{}`)
	prog, _ := json.Marshal(`N, URL = 64, "http://plain.test:` + pp + `/held"` + "\n" + holdProgram)
	if r, raw := d.egressRun(t, `{"sessionId":"`+sid+`","program":`+string(prog)+`}`); string(r.Value) != "64" {
		t.Fatalf("holding run: %s", raw)
	}
	fresh, _ := json.Marshal(`URLS = [["http://plain.test:` + pp + `/fresh", 0]]` + "\n" + secretsProgram)
	if r, raw := d.egressRun(t, `{"program":`+string(fresh)+`}`); !strings.HasSuffix(string(r.Value), `[200,"ok"]]`) {
		t.Errorf("a fresh run's request while the session holds its connections: %s", raw)
	}
	check, _ := json.Marshal(checkHeldProgram)
	if r, raw := d.egressRun(t, `{"sessionId":"`+sid+`","program":`+string(check)+`}`); string(r.Value) != `[64,0]` {
		t.Errorf("the session's idle connections after its run: %s", raw)
	}
}
