package main

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// egressProgram GETs URL n times directly, n times through the run's
// HTTPS_PROXY (the daemon's egress proxy: a tunnel) and n times the same
// upstream by a name bound to a secret (SECRET_URL: intercepted),
// alternating, each a fresh connection and TLS handshake as urllib makes
// them, and returns the seconds each took. The run's default trust is the
// daemon's bundle: the upstream's CA (the daemon's SSL_CERT_FILE) and the
// interception CA.
const egressProgram = `import ssl, time, urllib.request
ctx = ssl.create_default_context()
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
proxied = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))
out = {"direct": [], "proxied": [], "intercepted": []}
for i in range(N):
    for name, opener, url in (("direct", direct, URL), ("proxied", proxied, URL), ("intercepted", proxied, SECRET_URL)):
        t = time.perf_counter()
        with opener.open(url, timeout=30) as r:
            r.read()
        out[name].append(time.perf_counter() - t)
return out
`

// egressRows measures an HTTPS GET to a loopback upstream from inside a
// run, tier process, made directly, through the egress proxy's tunnel
// (target: proxied ≤ 1.5 × direct at p50) and intercepted for a secret.
func egressRows(o options) ([]row, error) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 1024))
	}))
	defer up.Close()
	dir, err := os.MkdirTemp("", "bench-egress-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	policy := filepath.Join(dir, "egress.json")
	hostport := strings.TrimPrefix(up.URL, "https://")
	port := hostport[strings.LastIndexByte(hostport, ':')+1:]
	// httptest's certificate names example.com: mapped to the upstream and
	// bound to a secret, its tunnels are intercepted.
	if err := os.WriteFile(policy, []byte(`{"allow": ["`+hostport+`", {"host": "example.com", "ports": [`+port+`], "private": true}],
		"secrets": [{"hosts": ["example.com"], "header": "X-Bench", "value": "bench"}]}`), 0o600); err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "upstream-ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		return nil, err
	}
	d, err := startDaemon(o, "CODERUN_ISOLATION=process", "CODERUN_EGRESS="+policy, "SSL_CERT_FILE="+caFile,
		"CODERUN_EGRESS_HOSTS=example.com=127.0.0.1")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	n := max(o.samples/4, 3)
	prog := fmt.Sprintf("N = %d\nURL = %q\nSECRET_URL = %q\n%s", n, up.URL+"/", "https://example.com:"+port+"/", egressProgram)
	r, err := d.run(prog, nil)
	if err != nil {
		return nil, err
	}
	var got struct{ Direct, Proxied, Intercepted []float64 }
	if err := json.Unmarshal(r.Value, &got); err != nil {
		return nil, fmt.Errorf("egress run: %s: %w", r.Value, err)
	}
	p50 := func(xs []float64) float64 {
		s := make(samples, len(xs))
		for i, x := range xs {
			s[i] = time.Duration(x * float64(time.Second))
		}
		return ms(s.pct(50))
	}
	direct, proxied, intercepted := p50(got.Direct), p50(got.Proxied), p50(got.Intercepted)
	return []row{
		newRow("HTTPS GET from a run, direct (tier process), p50", "ms", 0, direct, "fresh connection and TLS handshake each"),
		newRow("HTTPS GET from a run through the egress proxy, p50", "ms", direct, proxied, "ratio: proxied / direct (target ≤ 1.5)"),
		newRow("HTTPS GET from a run, intercepted for a secret, p50", "ms", direct, intercepted, "ratio: intercepted / direct (two TLS handshakes, a minted leaf cached)"),
	}, nil
}
