package e2e

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// egressUpstreams are a plain HTTP and an HTTPS server on loopback (the
// HTTPS certificate is httptest's, for example.com), and the daemon
// environment whose policy allows them under test names.
type egressUpstreams struct {
	plain, secure *httptest.Server
	caPEM         string
	env           map[string]string
}

func newEgressUpstreams(t *testing.T, policy func(plainPort, securePort string) string) *egressUpstreams {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "http://refused.test:"+portOf(r.Host)+"/", http.StatusFound)
		case "/big":
			_, _ = io.WriteString(w, strings.Repeat("x", 1<<20))
		default:
			_, _ = io.WriteString(w, "upstream-ok "+r.Method)
		}
	})
	u := &egressUpstreams{plain: httptest.NewServer(h), secure: httptest.NewTLSServer(h)}
	t.Cleanup(u.plain.Close)
	t.Cleanup(u.secure.Close)
	u.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: u.secure.Certificate().Raw}))
	path := filepath.Join(t.TempDir(), "egress.json")
	if err := os.WriteFile(path, []byte(policy(portOf(u.plain.URL), portOf(u.secure.URL))), 0o600); err != nil {
		t.Fatal(err)
	}
	u.env = map[string]string{"CODERUN_EGRESS": path,
		"CODERUN_EGRESS_HOSTS": "plain.test=127.0.0.1,example.com=127.0.0.1,refused.test=127.0.0.1,lo.test=127.0.0.1"}
	return u
}

// trustTestCA makes the daemon of u.env trust httptest's TLS certificate
// (the upstreams' example.com) as an upstream CA, through SSL_CERT_FILE.
func (u *egressUpstreams) trustTestCA(t *testing.T) {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(ca, []byte(u.caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	u.env["SSL_CERT_FILE"] = ca
}

// trustingEnv is the environment of a daemon whose egress policy is policy
// (for upstreams of the test's own, under the test names) and which trusts
// httptest's TLS certificate as an upstream CA.
func trustingEnv(t *testing.T, policy string) map[string]string {
	t.Helper()
	u := newEgressUpstreams(t, func(string, string) string { return policy })
	u.trustTestCA(t)
	return u.env
}

func portOf(hostport string) string { return hostport[strings.LastIndexByte(hostport, ':')+1:] }

// egressResult is a run result with its egress audit.
type egressResult struct {
	Value  json.RawMessage `json:"value"`
	Logs   []string        `json:"logs"`
	Error  json.RawMessage `json:"error"`
	Egress []struct {
		Host   string `json:"host"`
		Port   int    `json:"port"`
		Method string `json:"method"`
		Status int    `json:"status"`
		Bytes  int64  `json:"bytes"`
	} `json:"egress"`
}

func (d *daemon) egressRun(t *testing.T, params string) (egressResult, string) {
	t.Helper()
	m := d.call("run", params)
	if m.Error != nil {
		t.Fatalf("run refused: %+v", m.Error)
	}
	var r egressResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatal(err)
	}
	return r, string(m.Result)
}

// fetchProgram is a program that GETs each URL with urllib (the run's
// HTTP_PROXY/HTTPS_PROXY, a CA file for https) and returns, per URL, the
// status and the body's start.
const fetchProgram = `import json, ssl, urllib.request, urllib.error
ctx = ssl.create_default_context(cafile="ca.pem")
out = []
for u in URLS:
    try:
        with urllib.request.urlopen(u, context=ctx, timeout=30) as r:
            out.append([r.status, r.read().decode()[:200]])
    except urllib.error.HTTPError as e:
        out.append([e.code, e.read().decode()[:300]])
    except Exception as e:
        out.append([0, type(e).__name__ + ": " + str(e)[:300]])
return out
`

func fetchParams(t *testing.T, caPEM string, urls ...string) string {
	t.Helper()
	list, _ := json.Marshal(urls)
	prog, _ := json.Marshal("URLS = " + string(list) + "\n" + fetchProgram)
	ca, _ := json.Marshal(caPEM)
	return `{"program":` + string(prog) + `,"files":[{"path":"ca.pem","text":` + string(ca) + `}]}`
}

// TestC808Egress: in either tier a run's urllib reaches the allowed
// upstreams through the daemon's proxy over HTTP and HTTPS; a host
// the policy does not allow, and a redirect to it, answer 403 naming the
// policy; result.egress lists each request without its path or query.
func TestC808Egress(t *testing.T) {
	for _, mode := range []string{"fork", "spawn"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "spawn" {
				onlyInTier(t, "sandbox") // the other way into a run's namespace; tier process has one path
			}
			testEgress(t, mode)
		})
	}
}

func testEgress(t *testing.T, mode string) {
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, secure string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true},
			{"host": "example.com", "ports": [` + secure + `], "private": true}]}`
	})
	u.env["CODERUN_START_MODE"] = mode
	d := started(t, u.env)
	pp, sp := portOf(u.plain.URL), portOf(u.secure.URL)
	r, raw := d.egressRun(t, fetchParams(t, u.caPEM,
		"http://plain.test:"+pp+"/a?token=SECRET-QUERY",
		"https://example.com:"+sp+"/b",
		"http://refused.test:"+pp+"/",
		"http://plain.test:"+pp+"/redirect",
		"http://127.0.0.1:"+pp+"/"))
	var got [][]any
	if err := json.Unmarshal(r.Value, &got); err != nil || len(got) != 5 {
		t.Fatalf("value %s (%v); result %s", r.Value, err, raw)
	}
	if got[0][0] != 200.0 || got[0][1] != "upstream-ok GET" || got[1][0] != 200.0 || got[1][1] != "upstream-ok GET" {
		t.Errorf("allowed requests: %v", got[:2])
	}
	for i := 2; i < 5; i++ {
		if got[i][0] != 403.0 || !strings.Contains(got[i][1].(string), "not allowed by the egress policy") {
			t.Errorf("request %d: %v, want a 403 naming the egress policy", i, got[i])
		}
	}
	if strings.Contains(raw, "SECRET-QUERY") || strings.Contains(raw, "/a") {
		t.Errorf("the result shows a request's path or query: %s", raw)
	}
	hosts := []string{}
	for _, e := range r.Egress {
		hosts = append(hosts, e.Host+" "+e.Method+" "+strconvItoa(e.Status))
	}
	want := "plain.test GET 200|example.com CONNECT 200|refused.test GET 403|plain.test GET 302|refused.test GET 403|127.0.0.1 GET 403"
	if strings.Join(hosts, "|") != want {
		t.Errorf("result.egress %s, want %s", strings.Join(hosts, "|"), want)
	}
	if strings.Contains(d.stderr.String(), "SECRET-QUERY") {
		t.Errorf("the daemon's log shows a request's query")
	}
}

// TestC809EgressReported: initialize, bindings/describe and a run's
// narrowing; a run's egress member beyond the daemon's policy is −32602
// naming the entry.
func TestC809EgressReported(t *testing.T) {
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": ["api.example.com", {"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	d := start(t, u.env)
	m := d.call("initialize", `{}`)
	var init struct {
		Capabilities struct {
			Egress *struct {
				Allow    []string `json:"allow"`
				Enforced bool     `json:"enforced"`
				Note     string   `json:"note"`
			} `json:"egress"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(m.Result, &init); err != nil || init.Capabilities.Egress == nil {
		t.Fatalf("initialize %s: %v", m.Result, err)
	}
	e := init.Capabilities.Egress
	if strings.Join(e.Allow, ",") != "api.example.com,plain.test:"+portOf(u.plain.URL)+" (private)" || e.Enforced != (suiteTier == "sandbox") || e.Note == "" {
		t.Errorf("capabilities.egress %+v", e)
	}
	desc := d.call("bindings/describe", `{"bindings":[]}`)
	if !strings.Contains(string(desc.Result), "# Egress: HTTP(S) through HTTP_PROXY/HTTPS_PROXY to api.example.com, plain.test:") {
		t.Errorf("describe header: %s", desc.Result)
	}
	refused := d.call("run", `{"program":"1","egress":["api.example.com","other.example.com"]}`)
	if refused.Error == nil || refused.Error.Code != -32602 || refused.Error.Message != "egress[1] (other.example.com) is not within the daemon's egress policy" {
		t.Errorf("a widening egress: %+v", refused.Error)
	}
	// Narrowed to api.example.com only: plain.test is refused for this run.
	r, raw := d.egressRun(t, strings.Replace(fetchParams(t, u.caPEM, "http://plain.test:"+portOf(u.plain.URL)+"/"),
		`{"program":`, `{"egress":["api.example.com"],"program":`, 1))
	if !strings.Contains(string(r.Value), "403") || !strings.Contains(string(r.Value), "allowed: api.example.com)") {
		t.Errorf("narrowed run: %s", raw)
	}
}

// TestC810EgressBypass: a program that connects around the proxy. In tier
// sandbox the run's network namespace reaches nothing but the proxy: a
// direct connection to the allowed upstream fails, and the proxy's own
// port answers only proxy requests. In tier process the proxy is offered,
// not enforced (capabilities.egress.enforced is false, C809).
func TestC810EgressBypass(t *testing.T) {
	onlyInTier(t, "sandbox")
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	d := started(t, u.env)
	prog, _ := json.Marshal(`import socket, os
out = []
for host, port in [("127.0.0.1", ` + portOf(u.plain.URL) + `), ("1.1.1.1", 80), ("::1", ` + portOf(u.plain.URL) + `)]:
    try:
        socket.create_connection((host, port), timeout=5).close()
        out.append("connected")
    except OSError as e:
        out.append(type(e).__name__)
out.append(os.environ["HTTP_PROXY"].split("@")[1])
return out`)
	r, raw := d.egressRun(t, `{"program":`+string(prog)+`}`)
	var got []string
	if err := json.Unmarshal(r.Value, &got); err != nil || len(got) != 4 {
		t.Fatalf("result %s", raw)
	}
	for i, g := range got[:3] {
		if g == "connected" {
			t.Errorf("direct connection %d went through: %v", i, got)
		}
	}
	if got[3] != "127.0.0.1:3128" {
		t.Errorf("HTTP_PROXY points at %s", got[3])
	}
}

// TestC811EgressBudgets: limits.maxEgressRequests and maxEgressBytes bound
// a run's egress (refused requests count); an oversized body is cut.
func TestC811EgressBudgets(t *testing.T) {
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	d := started(t, u.env)
	base := "http://plain.test:" + portOf(u.plain.URL)
	params := strings.Replace(fetchParams(t, u.caPEM, base+"/big", base+"/", base+"/", base+"/"),
		`{"program":`, `{"limits":{"maxEgressRequests":3,"maxEgressBytes":4096},"program":`, 1)
	r, raw := d.egressRun(t, params)
	var got [][]any
	if err := json.Unmarshal(r.Value, &got); err != nil || len(got) != 4 {
		t.Fatalf("result %s", raw)
	}
	if strings.Contains(raw, `"bytes":1048576`) {
		t.Errorf("the whole 1 MiB body passed a 4096-byte budget: %s", raw)
	}
	if got[3][0] != 403.0 || !strings.Contains(got[3][1].(string), "maxEgressRequests") {
		t.Errorf("fourth request: %v", got[3])
	}
	refused := d.call("run", `{"program":"1","limits":{"maxEgressBytes":1099511627777}}`)
	if refused.Error == nil || refused.Error.Code != -32602 || !strings.Contains(refused.Error.Message, "limits.maxEgressBytes") {
		t.Errorf("a budget above the configured one: %+v", refused.Error)
	}
}

// TestC812EgressSession: a persistent session's runs go through the proxy
// under each run's own grant and audit.
func TestC812EgressSession(t *testing.T) {
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	d := started(t, u.env)
	sid := d.open(`{}`)
	for i := range 2 {
		params := strings.Replace(fetchParams(t, u.caPEM, "http://plain.test:"+portOf(u.plain.URL)+"/"),
			`{"program":`, `{"sessionId":"`+sid+`","program":`, 1)
		r, raw := d.egressRun(t, params)
		if !strings.Contains(string(r.Value), "upstream-ok GET") || len(r.Egress) != 1 || r.Egress[0].Status != 200 {
			t.Errorf("session run %d: %s", i, raw)
		}
	}
}

// TestC813EgressMetrics: serve's /metrics counts settled runs' egress
// requests, forwarded and refused, and their bytes.
func TestC813EgressMetrics(t *testing.T) {
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	s := startService(t, u.env, sockPath(t))
	p := s.dial("").initialize()
	m := p.call("run", fetchParams(t, u.caPEM, "http://plain.test:"+portOf(u.plain.URL)+"/", "http://refused.test:"+portOf(u.plain.URL)+"/"))
	if m.Error != nil {
		t.Fatalf("run: %+v", m.Error)
	}
	s.waitMetric(`coderun_egress_requests_total{result="forwarded"}`, 1)
	s.waitMetric(`coderun_egress_requests_total{result="refused"}`, 1)
	s.waitMetric(`coderun_egress_bytes_total`, float64(len("upstream-ok GET")))
}

// toyWheel is a minimal wheel of package egresstoy (VALUE = 42).
func toyWheel(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	files := [][2]string{
		{"egresstoy/__init__.py", "VALUE = 42\n"},
		{"egresstoy-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: egresstoy\nVersion: 1.0\n"},
		{"egresstoy-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"egresstoy-1.0.dist-info/RECORD", "egresstoy/__init__.py,,\negresstoy-1.0.dist-info/METADATA,,\negresstoy-1.0.dist-info/WHEEL,,\negresstoy-1.0.dist-info/RECORD,,\n"},
	}
	for _, f := range files {
		w, err := z.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, f[1])
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestC816EgressPipAndHttpx: pip downloads a package from an allowed index
// through the proxy (with shutil.copymode a no-op: tier sandbox refuses
// chmod, docs/containment.md §3), and httpx (the project venv's interpreter) makes an
// HTTPS request through it, unchanged.
func TestC816EgressPipAndHttpx(t *testing.T) {
	onlyInTier(t, "sandbox") // where pip meets Landlock too; the proxy path is the same in tier process
	leakcheck.Check(t)
	wheel := toyWheel(t)
	index := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/egresstoy/":
			_, _ = io.WriteString(w, `<html><body><a href="/files/egresstoy-1.0-py3-none-any.whl">egresstoy-1.0-py3-none-any.whl</a></body></html>`)
		case "/files/egresstoy-1.0-py3-none-any.whl":
			_, _ = w.Write(wheel)
		default:
			http.NotFound(w, r)
		}
	}))
	defer index.Close()
	u := newEgressUpstreams(t, func(_, secure string) string {
		return `{"allow": [{"host": "pypi.test", "ports": [` + portOf(index.URL) + `], "private": true},
			{"host": "example.com", "ports": [` + secure + `], "private": true}]}`
	})
	u.env["CODERUN_EGRESS_HOSTS"] += ",pypi.test=127.0.0.1"
	d := started(t, u.env)
	pipProg, _ := json.Marshal(`import subprocess, sys
# shutil.copymode is a no-op here: tier sandbox refuses chmod (docs/containment.md §3).
shim = "import runpy, shutil, sys; shutil.copymode = lambda *a, **k: None; sys.argv[0] = 'pip'; runpy.run_module('pip', run_name='__main__')"
p = subprocess.run([sys.executable, "-c", shim, "download", "--no-cache-dir", "--disable-pip-version-check",
    "--no-input", "--no-deps", "-d", "pkgs", "--trusted-host", "pypi.test", "--index-url", "http://pypi.test:` + portOf(index.URL) + `/simple/", "egresstoy"],
    capture_output=True, text=True, timeout=120)
if p.returncode:
    return p.stdout[-1500:] + p.stderr[-1500:]
sys.path.insert(0, "pkgs/egresstoy-1.0-py3-none-any.whl")  # a pure wheel imports as a zip
import egresstoy
return egresstoy.VALUE`)
	r, raw := d.egressRun(t, `{"program":`+string(pipProg)+`,"limits":{"maxWallMs":180000}}`)
	if string(r.Value) != "42" {
		t.Fatalf("pip through the proxy: %s", raw)
	}
	venvPython, err := filepath.Abs("../.venv/bin/python")
	if err != nil || exec.Command(venvPython, "-c", "import httpx").Run() != nil {
		t.Fatalf("no httpx in the project's venv (%s; make venv installs requirements-test.txt)", venvPython)
	}
	u.env["CODERUN_PYTHON_BIN"] = venvPython
	d = started(t, u.env)
	httpxProg, _ := json.Marshal(`import ssl, httpx
r = httpx.get("https://example.com:` + portOf(u.secure.URL) + `/h", verify=ssl.create_default_context(cafile="ca.pem"), timeout=30)
return [r.status_code, r.text]`)
	ca, _ := json.Marshal(u.caPEM)
	r, raw = d.egressRun(t, `{"program":`+string(httpxProg)+`,"files":[{"path":"ca.pem","text":`+string(ca)+`}]}`)
	if string(r.Value) != `[200,"upstream-ok GET"]` {
		t.Fatalf("httpx through the proxy: %s", raw)
	}
}

// TestC819EgressMCP: `coderun-rpc mcp` names the policy in run_python's
// description, and its runs go through the proxy with result.egress in the
// structured result.
func TestC819EgressMCP(t *testing.T) {
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	cs := mcpServeEnv(t, nil, u.env)
	var desc string
	for range 2 { // the first listing may still carry the initial description
		tools, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			if tool.Name == "run_python" {
				desc = tool.Description
			}
		}
		if strings.Contains(desc, "# Egress:") {
			break
		}
		runPython(t, cs, map[string]any{"program": "return 1"}, nil) // a run waits for the listing
	}
	if !strings.Contains(desc, "# Egress: HTTP(S) through HTTP_PROXY/HTTPS_PROXY to plain.test:"+portOf(u.plain.URL)+" (private) only") {
		t.Errorf("run_python's description lacks the egress line:\n%s", desc)
	}
	prog := `import urllib.request
return urllib.request.urlopen("http://plain.test:` + portOf(u.plain.URL) + `/", timeout=30).read().decode()`
	res := runPython(t, cs, map[string]any{"program": prog}, nil)
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(b), `"value":"upstream-ok GET"`) || !strings.Contains(string(b), `"host":"plain.test"`) || !strings.Contains(string(b), `"egress":[`) {
		t.Errorf("run_python through the proxy: isError %v, %s", res.IsError, b)
	}
}

// TestC1040EgressDescribeNarrowed: bindings/describe given a run's egress
// names that narrowed policy in its header (the hosts the run may reach), not
// the daemon's; a widening is −32602 naming the entry, as in run.
func TestC1040EgressDescribeNarrowed(t *testing.T) {
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": ["api.example.com", {"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	d := started(t, u.env)
	desc := d.call("bindings/describe", `{"bindings":[],"egress":["api.example.com"]}`)
	if desc.Error != nil || !strings.Contains(string(desc.Result), "# Egress: HTTP(S) through HTTP_PROXY/HTTPS_PROXY to api.example.com only") {
		t.Errorf("describe with a narrowed egress: %s %+v", desc.Result, desc.Error)
	}
	none := d.call("bindings/describe", `{"bindings":[],"egress":[]}`)
	if none.Error != nil || !strings.Contains(string(none.Result), "# Egress: none") {
		t.Errorf("describe with egress []: %s %+v", none.Result, none.Error)
	}
	wide := d.call("bindings/describe", `{"bindings":[],"egress":["other.example.com"]}`)
	if wide.Error == nil || wide.Error.Code != -32602 || wide.Error.Message != "egress[0] (other.example.com) is not within the daemon's egress policy" {
		t.Errorf("describe with a widening egress: %s %+v", wide.Result, wide.Error)
	}
}

// TestC1041EgressRequests: requests (in the project venv's interpreter,
// which requirements-test.txt gives it) makes an HTTPS and a plain HTTP
// request through the proxy unchanged, and a refused host answers 403
// naming the policy.
func TestC1041EgressRequests(t *testing.T) {
	leakcheck.Check(t)
	venvPython, err := filepath.Abs("../.venv/bin/python")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(venvPython, "-c", "import requests").CombinedOutput(); err != nil {
		t.Fatalf("the project's venv has no requests (make venv installs requirements-test.txt): %v %s", err, out)
	}
	u := newEgressUpstreams(t, func(plain, secure string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true},
			{"host": "example.com", "ports": [` + secure + `], "private": true}]}`
	})
	u.env["CODERUN_PYTHON_BIN"] = venvPython
	d := started(t, u.env)
	prog, _ := json.Marshal(`import requests
a = requests.get("https://example.com:` + portOf(u.secure.URL) + `/r", verify="ca.pem", timeout=30)
b = requests.post("http://plain.test:` + portOf(u.plain.URL) + `/r", data=b"x", timeout=30)
c = requests.get("http://refused.test:` + portOf(u.plain.URL) + `/", timeout=30)
return [a.status_code, a.text, b.status_code, b.text, c.status_code, c.text]`)
	ca, _ := json.Marshal(u.caPEM)
	r, raw := d.egressRun(t, `{"program":`+string(prog)+`,"files":[{"path":"ca.pem","text":`+string(ca)+`}]}`)
	var got []any
	if err := json.Unmarshal(r.Value, &got); err != nil || len(got) != 6 {
		t.Fatalf("requests through the proxy: %s", raw)
	}
	if got[0] != 200.0 || got[1] != "upstream-ok GET" || got[2] != 200.0 || got[3] != "upstream-ok POST" {
		t.Errorf("allowed requests: %v", got)
	}
	if got[4] != 403.0 || !strings.Contains(got[5].(string), "not allowed by the egress policy") {
		t.Errorf("refused host: %v", got[4:])
	}
	if len(r.Egress) != 3 || r.Egress[0].Method != "CONNECT" || r.Egress[1].Method != "POST" {
		t.Errorf("result.egress: %s", raw)
	}
}

// bypassProgram connects around the proxy (an IP literal, then a name) and
// fetches through it, then asks for an unknown service (an error that is
// not the network's), returning each outcome: the exception's class and
// text, or "connected"/the body.
const bypassProgram = `import socket, urllib.request
out = []
for target in [("127.0.0.1", PORT), ("upstream.invalid", 80)]:
    try:
        socket.create_connection(target, timeout=5).close()
        out.append("connected")
    except OSError as e:
        out.append(type(e).__name__ + ": " + str(e))
try:
    out.append(urllib.request.urlopen("http://plain.test:%d/" % PORT, timeout=30).read().decode())
except Exception as e:
    out.append(type(e).__name__ + ": " + str(e))
try:
    socket.getaddrinfo("127.0.0.1", "no-such-service")
except OSError as e:
    out.append(type(e).__name__ + ": " + str(e))
return out`

// TestC1042EgressBypassMessage: in tier sandbox a program's direct
// connection and name lookup fail with a message naming the egress policy
// and the way out (the proxy, the allowed hosts), in both start modes (the
// socket module imported before the program or by it), while HTTP through
// the proxy still works; a run narrowed to no host, and a daemon without a
// policy, say the run has no network access; a session's runs each name
// their own policy; a lookup error that is not about the network (an
// unknown service) keeps its own text.
func TestC1042EgressBypassMessage(t *testing.T) {
	onlyInTier(t, "sandbox")
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	port := portOf(u.plain.URL)
	prog, _ := json.Marshal(strings.ReplaceAll(bypassProgram, "PORT", port))
	entry := "plain.test:" + port + " (private)"
	for _, mode := range []string{"fork", "spawn"} {
		t.Run(mode, func(t *testing.T) {
			u.env["CODERUN_START_MODE"] = mode
			d := started(t, u.env)
			r, raw := d.egressRun(t, `{"program":`+string(prog)+`}`)
			var got []string
			if err := json.Unmarshal(r.Value, &got); err != nil || len(got) != 4 {
				t.Fatalf("result %s", raw)
			}
			if !strings.HasPrefix(got[3], "gaierror: ") || strings.Contains(got[3], "coderun") {
				t.Errorf("an unknown service's error is reworded: %q", got[3])
			}
			want := "coderun: direct connections and name lookups are blocked; HTTP(S) goes through the egress proxy (HTTPS_PROXY) to: " + entry
			if !strings.HasSuffix(got[0], "] "+want) || !strings.HasPrefix(got[1], "gaierror: [Errno ") || !strings.HasSuffix(got[1], "] "+want) {
				t.Errorf("direct connection and lookup: %q, want each to end in %q", got[:2], want)
			}
			if got[2] != "upstream-ok GET" {
				t.Errorf("through the proxy: %q", got[2])
			}
			r, raw = d.egressRun(t, `{"program":`+string(prog)+`,"egress":[]}`)
			if !strings.Contains(string(r.Value), "coderun: this run has no network access (egress policy: none)") {
				t.Errorf("a run with egress []: %s", raw)
			}
			// A session's runs each carry their own policy's note.
			sid := d.open(`{}`)
			r, raw = d.egressRun(t, `{"sessionId":"`+sid+`","program":`+string(prog)+`,"egress":[]}`)
			if !strings.Contains(string(r.Value), "coderun: this run has no network access (egress policy: none)") {
				t.Errorf("a session run with egress []: %s", raw)
			}
			r, raw = d.egressRun(t, `{"sessionId":"`+sid+`","program":`+string(prog)+`}`)
			if !strings.Contains(string(r.Value), want) || !strings.Contains(string(r.Value), "upstream-ok GET") {
				t.Errorf("the session's next run: %s", raw)
			}
		})
	}
	d := started(t, map[string]string{})
	r, raw := d.egressRun(t, `{"program":`+string(prog)+`}`)
	if !strings.Contains(string(r.Value), "coderun: this run has no network access (egress policy: none)") {
		t.Errorf("a daemon without a policy: %s", raw)
	}
}

// forkTokenProgram fetches URL through the run's proxy and, when OLD is set,
// once more with OLD as the proxy URL; it returns the statuses and the proxy
// URL of its environment.
const forkTokenProgram = `import os, urllib.request, urllib.error
def get(proxy=None):
    handlers = [urllib.request.ProxyHandler({"http": proxy})] if proxy else []
    try:
        return urllib.request.build_opener(*handlers).open(URL, timeout=30).status
    except urllib.error.HTTPError as e:
        return e.code
out = [get()]
if OLD:
    out.append(get(OLD))
return [out, os.environ["HTTP_PROXY"]]`

// TestC1043EgressForkToken: a session/fork gets proxy credentials of its
// own: its requests are forwarded, billed and audited as the fork's runs',
// the source's credentials are dead in the fork (407), and the source keeps
// its egress under new ones, also after two forks asked for at once; in tier sandbox, where the fork shares its
// source's network namespace, the fork keeps its egress once its source is
// closed.
func TestC1043EgressForkToken(t *testing.T) {
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	d := started(t, u.env)
	url, _ := json.Marshal("http://plain.test:" + portOf(u.plain.URL) + "/")
	fetch := func(sid, old string) ([]int, string, egressResult) {
		t.Helper()
		o, _ := json.Marshal(old)
		prog, _ := json.Marshal("URL = " + string(url) + "\nOLD = " + string(o) + "\n" + forkTokenProgram)
		r, raw := d.egressRun(t, `{"sessionId":"`+sid+`","program":`+string(prog)+`}`)
		var got struct {
			Statuses []int
			Proxy    string
		}
		var pair []json.RawMessage
		if json.Unmarshal(r.Value, &pair) != nil || len(pair) != 2 || json.Unmarshal(pair[0], &got.Statuses) != nil || json.Unmarshal(pair[1], &got.Proxy) != nil {
			t.Fatalf("result %s", raw)
		}
		return got.Statuses, got.Proxy, r
	}
	src := d.open(`{}`)
	st, srcProxy, _ := fetch(src, "")
	if len(st) != 1 || st[0] != 200 {
		t.Fatalf("the source's request: %v", st)
	}
	fork := d.fork(src)
	st, forkProxy, r := fetch(fork, srcProxy)
	if len(st) != 2 || st[0] != 200 || len(r.Egress) != 1 || r.Egress[0].Status != 200 {
		t.Errorf("the fork's own request: statuses %v, result.egress %+v", st, r.Egress)
	}
	if len(st) == 2 && st[1] != 407 {
		t.Errorf("the source's credentials in the fork: %d, want 407", st[1])
	}
	if forkProxy == srcProxy {
		t.Errorf("the fork kept its source's proxy credentials")
	}
	st, srcProxy2, r := fetch(src, "")
	if len(st) != 1 || st[0] != 200 || len(r.Egress) != 1 || srcProxy2 == srcProxy || srcProxy2 == forkProxy {
		t.Errorf("the source after the fork: statuses %v, egress %+v, new credentials %v", st, r.Egress, srcProxy2 != srcProxy)
	}
	// Two forks asked for at once take their turns: each, and the source,
	// ends with credentials of its own that work.
	ids := []string{d.request("session/fork", `{"sessionId":"`+src+`"}`), d.request("session/fork", `{"sessionId":"`+src+`"}`)}
	seen := map[string]bool{srcProxy: true, forkProxy: true, srcProxy2: true}
	for i, id := range append(ids, "") {
		sid := src
		if id != "" {
			var f struct{ SessionID string }
			if m := d.wait(id); m.Error != nil || json.Unmarshal(m.Result, &f) != nil {
				t.Fatalf("session/fork %d: %+v", i, m.Error)
			}
			sid = f.SessionID
		}
		st, proxy, _ := fetch(sid, "")
		if len(st) != 1 || st[0] != 200 || seen[proxy] {
			t.Errorf("after two forks at once, session %d: statuses %v, credentials seen before %v", i, st, seen[proxy])
		}
		seen[proxy] = true
	}
	if m := d.call("session/close", `{"sessionId":"`+src+`"}`); m.Error != nil {
		t.Fatalf("session/close: %+v", m.Error)
	}
	if st, _, _ := fetch(fork, ""); len(st) != 1 || st[0] != 200 {
		t.Errorf("the fork once its source is closed: %v", st)
	}
}
