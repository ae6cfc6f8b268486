package e2e

import (
	"encoding/json"
	"google.golang.org/protobuf/proto"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// seen is what a secrets upstream received: per request, its host, the
// headers a secret may be in, and the raw query.
type seen struct {
	mu   sync.Mutex
	reqs []string
}

func (s *seen) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, strings.Join([]string{r.Host, r.URL.Path, "auth=" + r.Header.Get("Authorization"),
			"token=" + r.Header.Get("X-Token"), "query=" + r.URL.RawQuery}, " "))
		s.mu.Unlock()
		_, _ = io.WriteString(w, "ok") // never echoes: the run's result must not hold a secret
	})
}

func (s *seen) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.reqs, "\n")
}

// secretsProgram GETs each [url, with the placeholder in X-Token] with
// urllib and the run's default trust (SSL_CERT_FILE, the daemon's bundle),
// returning the statuses, the refusals' text, and whether the placeholder
// looks like one.
const secretsProgram = `import os, urllib.request, urllib.error
ph = os.environ.get("SVC_TOKEN", "")
out = [ph.startswith("coderun-placeholder-"), os.environ.get("SSL_CERT_FILE", "") != ""]
for u, send in URLS:
    req = urllib.request.Request(u, headers={"X-Token": "tok " + ph} if send else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            out.append([r.status, r.read().decode()[:100]])
    except urllib.error.HTTPError as e:
        out.append([e.code, e.read().decode()[:300]])
    except Exception as e:
        out.append([0, type(e).__name__ + ": " + str(e)[:300]])
return out
`

// plainSecretUpstream is a loopback HTTP upstream named plain.test that
// records what it receives (bound), its port, and the environment of a
// daemon whose egress policy allows it and binds it secrets (the JSON
// array of entries; "" for none).
func plainSecretUpstream(t *testing.T, secrets string) (bound *seen, port string, env map[string]string) {
	t.Helper()
	bound = &seen{}
	plain := httptest.NewServer(bound.handler())
	t.Cleanup(plain.Close)
	port = portOf(plain.URL)
	policy := `{"allow": [{"host": "plain.test", "ports": [` + port + `], "private": true}]`
	if secrets != "" {
		policy += `, "secrets": ` + secrets
	}
	return bound, port, newEgressUpstreams(t, func(string, string) string { return policy + "}" }).env
}

// secretsProgramFor is secretsProgram GETting each of urls with the
// placeholder, as a JSON string for a run's "program".
func secretsProgramFor(urls ...string) string {
	list := make([][]any, len(urls))
	for i, u := range urls {
		list[i] = []any{u, 1}
	}
	js, _ := json.Marshal(list)
	prog, _ := json.Marshal("URLS = " + string(js) + "\n" + secretsProgram + "\n")
	return string(prog)
}

// TestC1010EgressSecrets: in either tier, with secrets in the daemon's
// policy file, a run's urllib request to the bound host carries the header
// and query secrets and the env secret in place of its placeholder, over
// plain HTTP and over HTTPS (intercepted: the run trusts the daemon's CA
// through SSL_CERT_FILE, the proxy verifies the upstream against the test
// CA given to the daemon as SSL_CERT_FILE); an allowed host without
// secrets gets none; the placeholder sent to it is refused with 403 and
// audited. No secret value appears in the result, the daemon's log,
// initialize or describe; the values are reported by name only.
func TestC1010EgressSecrets(t *testing.T) {
	leakcheck.Check(t)
	var bound, other seen
	plain := httptest.NewServer(bound.handler())
	defer plain.Close()
	secure := httptest.NewTLSServer(bound.handler()) // its certificate is for example.com
	defer secure.Close()
	unbound := httptest.NewServer(other.handler())
	defer unbound.Close()
	// httptest's TLS servers share one certificate: trustingEnv trusts secure's.
	pp, sp, op := portOf(plain.URL), portOf(secure.URL), portOf(unbound.URL)
	policy := `{"allow": [{"host": "plain.test", "ports": [` + pp + `], "private": true},
		{"host": "example.com", "ports": [` + sp + `], "private": true},
		{"host": "lo.test", "ports": [` + op + `], "private": true}],
	  "secrets": [
		{"hosts": ["plain.test", "example.com"], "header": "Authorization", "valueEnv": "C1010_HEADER"},
		{"hosts": ["plain.test"], "query": "api_key", "value": "QRY-SECRET-C1010"},
		{"hosts": ["plain.test", "example.com"], "env": "SVC_TOKEN", "value": "ENV-SECRET-C1010"}]}`
	env := trustingEnv(t, policy)
	env["C1010_HEADER"] = "Bearer HDR-SECRET-C1010"
	env["CODERUN_LOG_LEVEL"] = "debug"
	d := start(t, env)
	init := d.call("initialize", `{}`)
	if !strings.Contains(string(init.Result), `"secrets":["header Authorization for plain.test, example.com","query api_key for plain.test","env SVC_TOKEN for plain.test, example.com"]`) {
		t.Errorf("initialize does not name the secrets: %s", init.Result)
	}
	desc := d.call("bindings/describe", `{"bindings":[]}`)
	if !strings.Contains(string(desc.Result), "env SVC_TOKEN for plain.test, example.com") {
		t.Errorf("describe does not name the env secret: %s", desc.Result)
	}
	urls, _ := json.Marshal([][]any{
		{"http://plain.test:" + pp + "/p?x=1", 1},
		{"https://example.com:" + sp + "/s", 1},
		{"http://lo.test:" + op + "/clean", 0},
		{"http://lo.test:" + op + "/leak", 1},
	})
	prog, _ := json.Marshal("URLS = " + string(urls) + "\n" + secretsProgram)
	r, raw := d.egressRun(t, `{"program":`+string(prog)+`}`)
	var got []json.RawMessage
	if err := json.Unmarshal(r.Value, &got); err != nil || len(got) != 6 {
		t.Fatalf("run: %s", raw)
	}
	if string(got[0]) != "true" || string(got[1]) != "true" {
		t.Errorf("the run's SVC_TOKEN is not a placeholder, or it has no SSL_CERT_FILE: %s", raw)
	}
	for i, want := range []string{`[200,"ok"]`, `[200,"ok"]`, `[200,"ok"]`} {
		if string(got[i+2]) != want {
			t.Errorf("request %d: %s, want %s (result %s)", i, got[i+2], want, raw)
		}
	}
	if !strings.HasPrefix(string(got[5]), `[403,"egress refused: the request carries a secret's placeholder`) {
		t.Errorf("the placeholder to another host: %s", got[5])
	}
	wantBound := []string{
		"plain.test:" + pp + " /p auth=Bearer HDR-SECRET-C1010 token=tok ENV-SECRET-C1010 query=api_key=QRY-SECRET-C1010&x=1",
		"example.com:" + sp + " /s auth=Bearer HDR-SECRET-C1010 token=tok ENV-SECRET-C1010 query=",
	}
	if b := bound.all(); b != strings.Join(wantBound, "\n") {
		t.Errorf("the bound host received:\n%s\nwant:\n%s", b, strings.Join(wantBound, "\n"))
	}
	if o := other.all(); o != "lo.test:"+op+" /clean auth= token= query=" {
		t.Errorf("the host without secrets received:\n%s", o)
	}
	if len(r.Egress) < 4 || r.Egress[len(r.Egress)-1].Host != "lo.test" || r.Egress[len(r.Egress)-1].Status != 403 {
		t.Errorf("audit %+v", r.Egress)
	}
	// valueEnv's variable is the daemon's, never the run's.
	if envRun, envRaw := d.egressRun(t, `{"program":"import os\nreturn [k for k, v in os.environ.items() if 'C1010' in k or 'SECRET' in v]"}`); string(envRun.Value) != "[]" {
		t.Errorf("the run's environment holds a secret: %s", envRaw)
	}
	for _, where := range []struct{ name, text string }{{"result", raw}, {"log", d.stderr.String()},
		{"initialize", string(init.Result)}, {"describe", string(desc.Result)}} {
		for _, v := range []string{"HDR-SECRET", "QRY-SECRET", "ENV-SECRET"} {
			if strings.Contains(where.text, v) {
				t.Errorf("the %s shows a secret value (%s)", where.name, v)
			}
		}
	}
}

// TestC1011EgressRunSecrets: a client's per-run secrets (the daemon's policy
// has none) are added to the run's requests to their host only, over HTTPS
// through interception; one for a host outside the run's egress is
// −32602 naming the entry, never the value.
func TestC1011EgressRunSecrets(t *testing.T) {
	leakcheck.Check(t)
	var bound seen
	secure := httptest.NewTLSServer(bound.handler())
	defer secure.Close()
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "example.com", "ports": [` + portOf(secure.URL) + `], "private": true},
			{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	u.trustTestCA(t)
	d := started(t, u.env)
	refused := d.call("run", `{"program":"1","egress":["plain.test:`+portOf(u.plain.URL)+`"],
		"secrets":[{"hosts":["example.com"],"header":"X-Key","value":"RUN-SECRET-C1011"}]}`)
	if refused.Error == nil || refused.Error.Code != -32602 ||
		refused.Error.Message != `secrets[0].hosts[0] "example.com" is not within the egress allow list` {
		t.Errorf("a secret outside the run's egress: %+v", refused.Error)
	}
	urls, _ := json.Marshal([][]any{{"https://example.com:" + portOf(secure.URL) + "/r", 1}})
	prog, _ := json.Marshal("URLS = " + string(urls) + "\n" + secretsProgram)
	r, raw := d.egressRun(t, `{"program":`+string(prog)+`,
		"secrets":[{"hosts":["example.com"],"header":"Authorization","value":"Bearer RUN-SECRET-C1011"},
			{"hosts":["example.com"],"env":"SVC_TOKEN","value":"RUN-ENV-C1011"}]}`)
	if !strings.HasPrefix(string(r.Value), `[true,true,[200,"ok"]]`) {
		t.Fatalf("run: %s", raw)
	}
	want := "example.com:" + portOf(secure.URL) + " /r auth=Bearer RUN-SECRET-C1011 token=tok RUN-ENV-C1011 query="
	if b := bound.all(); b != want {
		t.Errorf("the upstream received %q, want %q", b, want)
	}
	for _, text := range []string{raw, d.stderr.String()} {
		if strings.Contains(text, "RUN-SECRET") || strings.Contains(text, "RUN-ENV") {
			t.Errorf("a secret value shows: %s", text)
		}
	}
}

// TestC1012EgressSecretsBadFile: an invalid secret in the policy file stops
// the daemon at start-up (and --check) with exit 2 and one line naming
// the file, the entry and the rule, never the value; a valid one is named
// by --check without its value.
func TestC1012EgressSecretsBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.json")
	policy := `{"allow": ["api.example.com"], "secrets": [{"hosts": ["api.example.com"], "header": "Authorization", "value": "Bearer FILE-SECRET\r\nX: y"}]}`
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemonBin, "--check")
	cmd.Env = environ(t, map[string]string{"CODERUN_EGRESS": path})
	out, _ := cmd.CombinedOutput()
	want := `CODERUN_EGRESS="` + path + `": secrets[0].value: must not hold CR, LF, NUL`
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), want) || strings.Contains(string(out), "FILE-SECRET") {
		t.Errorf("--check: exit %d, want 2 and %q without the value:\n%s", cmd.ProcessState.ExitCode(), want, out)
	}
	// A valid file: --check names the secrets, not their values.
	policy = `{"allow": ["api.example.com"], "secrets": [{"hosts": ["api.example.com"], "env": "API_KEY", "value": "FILE-SECRET"}]}`
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(daemonBin, "--check")
	cmd.Env = environ(t, map[string]string{"CODERUN_EGRESS": path})
	out, _ = cmd.CombinedOutput()
	if !strings.Contains(string(out), "egress secrets (values never shown): env API_KEY for api.example.com") || strings.Contains(string(out), "FILE-SECRET") {
		t.Errorf("--check with a valid file (exit %d):\n%s", cmd.ProcessState.ExitCode(), out)
	}
}

// TestC1013EgressSecretsAttacks: a bound host that redirects to another
// host: the follow-up carries no header secret, and the placeholder the
// program re-sends is refused; a request smuggling the placeholder in the
// path to another host is refused; the trust bundle holds no private key
// and, in tier sandbox, a run cannot change it.
func TestC1013EgressSecretsAttacks(t *testing.T) {
	leakcheck.Check(t)
	var other seen
	unbound := httptest.NewServer(other.handler())
	defer unbound.Close()
	op := portOf(unbound.URL)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://lo.test:"+op+"/after"+r.URL.Path, http.StatusFound)
	}))
	defer redirector.Close()
	rp := portOf(redirector.URL)
	u := newEgressUpstreams(t, func(string, string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + rp + `], "private": true},
			{"host": "lo.test", "ports": [` + op + `], "private": true}],
		  "secrets": [{"hosts": ["plain.test"], "header": "Authorization", "value": "Bearer ATTACK-SECRET"},
			{"hosts": ["plain.test"], "env": "SVC_TOKEN", "value": "ATTACK-ENV"}]}`
	})
	d := started(t, u.env)
	urls, _ := json.Marshal([][]any{{"http://plain.test:" + rp + "/a", 0}, {"http://plain.test:" + rp + "/b", 1}})
	prog, _ := json.Marshal("URLS = " + string(urls) + "\n" + secretsProgram[:strings.Index(secretsProgram, "return out")] + `
for u in ["http://lo.test:` + op + `/" + ph]:
    try:
        out.append(urllib.request.urlopen(u, timeout=30).status)
    except urllib.error.HTTPError as e:
        out.append([e.code, e.read().decode()[:80]])
bundle = open(os.environ["SSL_CERT_FILE"]).read()
out.append(["PRIVATE KEY" in bundle, "BEGIN CERTIFICATE" in bundle])
try:
    open(os.environ["SSL_CERT_FILE"], "a").close()
    out.append("bundle writable")
except OSError as e:
    out.append(type(e).__name__)
return out`)
	r, raw := d.egressRun(t, `{"program":`+string(prog)+`}`)
	var got []json.RawMessage
	if err := json.Unmarshal(r.Value, &got); err != nil || len(got) != 7 {
		t.Fatalf("run: %s", raw)
	}
	if string(got[2]) != `[200,"ok"]` {
		t.Errorf("the redirect without the placeholder: %s", got[2])
	}
	if !strings.HasPrefix(string(got[3]), `[403,"egress refused: the request carries a secret's placeholder`) {
		t.Errorf("the redirect re-sending the placeholder: %s", got[3])
	}
	if !strings.HasPrefix(string(got[4]), `[403,"egress refused: the request carries a secret's placeholder`) {
		t.Errorf("the placeholder in another host's path: %s", got[4])
	}
	if string(got[5]) != "[false,true]" {
		t.Errorf("the bundle (private key, certificates): %s", got[5])
	}
	if suiteTier == "sandbox" && string(got[6]) != `"PermissionError"` {
		t.Errorf("a run writing the trust bundle: %s", got[6])
	}
	if o := other.all(); o != "lo.test:"+op+" /after/a auth= token= query=" {
		t.Errorf("the other host received:\n%s", o)
	}
	if strings.Contains(raw, "ATTACK-") || strings.Contains(d.stderr.String(), "ATTACK-") {
		t.Errorf("a secret value shows in the result or the log")
	}
}

// TestC1014EgressSecretsNotTraced: in service mode with tracing on, a run
// with per-run secrets (header and env) reaches its host; no secret value
// is in the exported spans, the metrics or the log.
func TestC1014EgressSecretsNotTraced(t *testing.T) {
	var bound seen
	plain := httptest.NewServer(bound.handler())
	defer plain.Close()
	sink := &otlpSink{}
	collectorSrv := httptest.NewServer(sink)
	defer collectorSrv.Close()
	u := newEgressUpstreams(t, func(string, string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + portOf(plain.URL) + `], "private": true}]}`
	})
	u.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collectorSrv.URL
	u.env["OTEL_BSP_SCHEDULE_DELAY"] = "50"
	s := startService(t, u.env, sockPath(t))
	p := s.dial("").initialize()
	urls, _ := json.Marshal([][]any{{"http://plain.test:" + portOf(plain.URL) + "/t?q=1", 1}})
	prog, _ := json.Marshal("URLS = " + string(urls) + "\n" + secretsProgram)
	m := p.call("run", `{"program":`+string(prog)+`,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"secrets":[{"hosts":["plain.test"],"query":"key","value":"TRACE-SECRET-Q"},{"hosts":["plain.test"],"env":"SVC_TOKEN","value":"TRACE-SECRET-E"}]}`)
	if m.Error != nil || !strings.Contains(string(m.Result), `[true,true,[200,"ok"]]`) {
		t.Fatalf("run: %s %+v", m.Result, m.Error)
	}
	if b := bound.all(); !strings.Contains(b, "token=tok TRACE-SECRET-E query=key=TRACE-SECRET-Q&q=1") {
		t.Errorf("the upstream received %q", b)
	}
	s.waitMetric(`coderun_egress_requests_total{result="forwarded"}`, 1)
	_, metrics := s.get("/metrics")
	if code := s.stop(20 * time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	sink.mu.Lock()
	var spans []byte
	for _, sp := range sink.spans {
		b, _ := proto.Marshal(sp)
		spans = append(spans, b...)
	}
	n := len(sink.spans)
	sink.mu.Unlock()
	if n == 0 {
		t.Errorf("no spans exported")
	}
	for _, where := range []struct{ name, text string }{{"result", string(m.Result)}, {"metrics", metrics},
		{"spans", string(spans)}, {"log", s.stderr.String()}} {
		if strings.Contains(where.text, "TRACE-SECRET") {
			t.Errorf("the %s shows a secret value", where.name)
		}
	}
}

// TestC1015EgressSecretsSession: a session's child holds one placeholder
// for its life: two runs of the session send it and the upstream receives
// the value both times; session/open's own secrets join the policy's; a
// session run's secrets are −32602.
func TestC1015EgressSecretsSession(t *testing.T) {
	leakcheck.Check(t)
	bound, pp, env := plainSecretUpstream(t, `[{"hosts": ["plain.test"], "env": "SVC_TOKEN", "value": "SESSION-SECRET"}]`)
	d := started(t, env)
	sid := d.open(`{}`)
	prog := secretsProgramFor("http://plain.test:" + pp + "/s")
	var first string
	for i := range 2 {
		r, raw := d.egressRun(t, `{"sessionId":"`+sid+`","program":`+string(prog)+`}`)
		if !strings.HasPrefix(string(r.Value), `[true,true,[200,"ok"]]`) {
			t.Fatalf("session run %d: %s", i, raw)
		}
		ph, _ := d.egressRun(t, `{"sessionId":"`+sid+`","program":"import os\nreturn os.environ['SVC_TOKEN']"}`)
		if i == 0 {
			first = string(ph.Value)
		} else if string(ph.Value) != first {
			t.Errorf("the session's placeholder changed between runs: %s then %s", first, ph.Value)
		}
	}
	want := "plain.test:" + pp + " /s auth= token=tok SESSION-SECRET query="
	if b := bound.all(); b != want+"\n"+want {
		t.Errorf("the upstream received:\n%s", b)
	}
	// A session's own secrets join the policy's for its runs; a session
	// run cannot add any.
	own := d.open(`{"secrets":[{"hosts":["plain.test"],"header":"Authorization","value":"Bearer SESSION-OWN"}]}`)
	if r, raw := d.egressRun(t, `{"sessionId":"`+own+`","program":`+string(prog)+`}`); !strings.HasPrefix(string(r.Value), `[true,true,[200,"ok"]]`) {
		t.Fatalf("own-secrets session run: %s", raw)
	}
	if b := bound.all(); !strings.HasSuffix(b, "\nplain.test:"+pp+" /s auth=Bearer SESSION-OWN token=tok SESSION-SECRET query=") {
		t.Errorf("the upstream received:\n%s", b)
	}
	refused := d.call("run", `{"sessionId":"`+own+`","program":"1","secrets":[{"hosts":["plain.test"],"env":"K","value":"v"}]}`)
	if refused.Error == nil || refused.Error.Message != "secrets are given to session/open for every run of the session" {
		t.Errorf("a session run's secrets: %+v", refused.Error)
	}
	if strings.Contains(d.stderr.String(), "SESSION-") {
		t.Errorf("the log shows a session's secret")
	}
}

// TestC1016EgressSecretsHttpxRequests: httpx and requests in a run, with
// their default trust (SSL_CERT_FILE, REQUESTS_CA_BUNDLE: the daemon's
// bundle), reach an intercepted HTTPS host with the env secret in place of
// the placeholder, and a host without secrets is tunnelled and verifies
// against the bundle's roots.
func TestC1016EgressSecretsHttpxRequests(t *testing.T) {
	leakcheck.Check(t)
	venvPython, err := filepath.Abs("../.venv/bin/python")
	if err != nil || exec.Command(venvPython, "-c", "import httpx, requests").Run() != nil {
		t.Skipf("no httpx or requests in the project's venv (%s)", venvPython)
	}
	var bound seen
	secure := httptest.NewTLSServer(bound.handler())
	defer secure.Close()
	u := newEgressUpstreams(t, func(_, other string) string {
		return `{"allow": [{"host": "example.com", "ports": [` + portOf(secure.URL) + `], "private": true},
			{"host": "api.example.com", "ports": [` + other + `], "private": true}],
		  "secrets": [{"hosts": ["example.com"], "env": "SVC_TOKEN", "value": "LIB-SECRET"}]}`
	})
	u.trustTestCA(t)
	u.env["CODERUN_PYTHON_BIN"] = venvPython
	u.env["CODERUN_EGRESS_HOSTS"] += ",api.example.com=127.0.0.1"
	d := started(t, u.env)
	// api.example.com has no secret: its tunnel is not intercepted, and the
	// bundle's roots (the daemon's: here the test CA) verify httptest's
	// certificate (example.com, *.example.com) end to end.
	prog, _ := json.Marshal(`import os, httpx, requests
ph = os.environ["SVC_TOKEN"]
url = "https://example.com:` + portOf(secure.URL) + `/lib"
a = httpx.get(url, headers={"X-Token": "tok " + ph}, timeout=30)
b = requests.get(url, headers={"X-Token": "tok " + ph}, timeout=30)
c = httpx.get("https://api.example.com:` + portOf(u.secure.URL) + `/", timeout=30)
return [a.status_code, a.text, b.status_code, b.text, c.status_code, c.text]`)
	r, raw := d.egressRun(t, `{"program":`+string(prog)+`}`)
	if string(r.Value) != `[200,"ok",200,"ok",200,"upstream-ok GET"]` {
		t.Fatalf("run: %s", raw)
	}
	var audit []string
	for _, e := range r.Egress {
		audit = append(audit, e.Method+" "+e.Host)
	}
	// Each intercepted tunnel is its CONNECT and its inner GET; the other
	// tunnel is a CONNECT alone.
	if got := strings.Join(audit, ","); got != "CONNECT example.com,GET example.com,CONNECT example.com,GET example.com,CONNECT api.example.com" {
		t.Errorf("audit %s", got)
	}
	want := "example.com:" + portOf(secure.URL) + " /lib auth= token=tok LIB-SECRET query="
	if b := bound.all(); b != want+"\n"+want {
		t.Errorf("the upstream received:\n%s", b)
	}
}

// TestC1017EgressSecretsMCP: `coderun-rpc mcp` runs with the daemon
// policy's secrets: run_python's description names the env secret, and a
// run's request carries its value in place of the placeholder.
func TestC1017EgressSecretsMCP(t *testing.T) {
	bound, pp, env := plainSecretUpstream(t, `[{"hosts": ["plain.test"], "env": "SVC_TOKEN", "value": "MCP-SECRET"}]`)
	cs := mcpServeEnv(t, nil, env)
	urls, _ := json.Marshal([][]any{{"http://plain.test:" + pp + "/m", 1}})
	res := runPython(t, cs, map[string]any{"program": "URLS = " + string(urls) + "\n" + secretsProgram}, nil)
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(b), `[true,true,[200,"ok"]]`) || strings.Contains(string(b), "MCP-SECRET") {
		t.Errorf("run_python: isError %v, %s", res.IsError, b)
	}
	if got := bound.all(); got != "plain.test:"+pp+" /m auth= token=tok MCP-SECRET query=" {
		t.Errorf("the upstream received %q", got)
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "run_python" && (!strings.Contains(tool.Description, "env SVC_TOKEN for plain.test") || strings.Contains(tool.Description, "MCP-SECRET")) {
			t.Errorf("run_python's description: %s", tool.Description)
		}
	}
}

// TestC1023EgressSecretsFork: a session/fork copy inherits its source's
// placeholders in its environment and, through credentials of its own, the
// same secrets: its request reaches the upstream with the value, and so does
// the source's next run.
func TestC1023EgressSecretsFork(t *testing.T) {
	leakcheck.Check(t)
	bound, pp, env := plainSecretUpstream(t, `[{"hosts": ["plain.test"], "env": "SVC_TOKEN", "value": "FORK-SECRET"}]`)
	d := started(t, env)
	sid := d.open(`{}`)
	prog := secretsProgramFor("http://plain.test:" + pp + "/f")
	if r, raw := d.egressRun(t, `{"sessionId":"`+sid+`","program":"return 1"}`); string(r.Value) != "1" {
		t.Fatalf("source run: %s", raw)
	}
	m := d.call("session/fork", `{"sessionId":"`+sid+`"}`)
	if m.Error != nil {
		t.Skipf("session/fork not served here: %+v", m.Error)
	}
	var f struct{ SessionID string }
	if err := json.Unmarshal(m.Result, &f); err != nil || f.SessionID == "" {
		t.Fatalf("session/fork result %s", m.Result)
	}
	r, raw := d.egressRun(t, `{"sessionId":"`+f.SessionID+`","program":`+string(prog)+`}`)
	if !strings.HasPrefix(string(r.Value), `[true,true,[200,"ok"]]`) {
		t.Errorf("the fork's request: %s", raw)
	}
	if b := bound.all(); b != "plain.test:"+pp+" /f auth= token=tok FORK-SECRET query=" {
		t.Errorf("the upstream received from the fork:\n%s", b)
	}
	if r, raw := d.egressRun(t, `{"sessionId":"`+sid+`","program":`+string(prog)+`}`); !strings.HasPrefix(string(r.Value), `[true,true,[200,"ok"]]`) {
		t.Errorf("the source's run after the fork: %s", raw)
	}
	if b, one := bound.all(), "plain.test:"+pp+" /f auth= token=tok FORK-SECRET query="; b != one+"\n"+one {
		t.Errorf("the upstream received:\n%s", b)
	}
}
