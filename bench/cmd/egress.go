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

// egressProgram GETs URL n times directly and n times through the run's
// HTTPS_PROXY (the daemon's egress proxy), alternating, each a fresh
// connection and TLS handshake as urllib makes them, and returns the
// seconds each took.
const egressProgram = `import ssl, time, urllib.request
ctx = ssl.create_default_context(cafile="ca.pem")
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
proxied = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))
out = {"direct": [], "proxied": []}
for i in range(N):
    for name, opener in (("direct", direct), ("proxied", proxied)):
        t = time.perf_counter()
        with opener.open(URL, timeout=30) as r:
            r.read()
        out[name].append(time.perf_counter() - t)
return out
`

// egressRows measures an HTTPS GET to a loopback upstream from inside a
// run, tier process, made directly and through the egress proxy (target:
// proxied ≤ 1.5 × direct at p50).
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
	if err := os.WriteFile(policy, []byte(`{"allow": ["`+hostport+`"]}`), 0o600); err != nil {
		return nil, err
	}
	d, err := startDaemon(o, "CODERUN_ISOLATION=process", "CODERUN_EGRESS="+policy)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	n := max(o.samples/4, 3)
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw}))
	prog := fmt.Sprintf("N = %d\nURL = %q\n%s", n, up.URL+"/", egressProgram)
	r, err := d.run(prog, map[string]any{"files": []map[string]string{{"path": "ca.pem", "text": ca}}})
	if err != nil {
		return nil, err
	}
	var got struct{ Direct, Proxied []float64 }
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
	direct, proxied := p50(got.Direct), p50(got.Proxied)
	return []row{
		newRow("HTTPS GET from a run, direct (tier process), p50", "ms", 0, direct, "fresh connection and TLS handshake each"),
		newRow("HTTPS GET from a run through the egress proxy, p50", "ms", direct, proxied, "ratio: proxied / direct (target ≤ 1.5)"),
	}, nil
}
