package coderun_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	coderun "github.com/coderun-rpc/coderun-rpc/clients/go"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// C1022: RunOptions.Secrets and SessionOptions.Secrets reach the daemon:
// the header secret is added to the run's request to its host only; an
// entry outside the egress is −32602 naming it.
func TestC1022RunSecrets(t *testing.T) {
	leakcheck.Check(t)
	var mu sync.Mutex
	var keys []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Host[:strings.IndexByte(r.Host, ':')]+"="+r.Header.Get("X-Key"))
		mu.Unlock()
	}))
	defer up.Close()
	port := up.URL[strings.LastIndexByte(up.URL, ':')+1:]
	policy := filepath.Join(t.TempDir(), "egress.json")
	if err := os.WriteFile(policy, []byte(`{"allow": [{"host": "api.test", "ports": [`+port+`], "private": true},
		{"host": "other.test", "ports": [`+port+`], "private": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := start(t, "CODERUN_EGRESS="+policy, "CODERUN_EGRESS_HOSTS=api.test=127.0.0.1,other.test=127.0.0.1")
	prog := `import urllib.request
return [urllib.request.urlopen(u, timeout=30).status for u in ["http://api.test:` + port + `/", "http://other.test:` + port + `/"]]`
	r, err := c.Run(context.Background(), prog, &coderun.RunOptions{
		Secrets: []coderun.Secret{{Hosts: []string{"api.test"}, Header: "X-Key", Value: "go-secret"}}})
	if err != nil || string(r.Value) != "[200,200]" {
		t.Fatalf("run: %v %+v", err, r)
	}
	mu.Lock()
	got := strings.Join(keys, ",")
	mu.Unlock()
	if got != "api.test=go-secret,other.test=" {
		t.Errorf("the upstream received %s", got)
	}
	sess, err := c.OpenSession(context.Background(), &coderun.SessionOptions{
		Secrets: []coderun.Secret{{Hosts: []string{"api.test"}, Header: "X-Key", Value: "go-session"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := sess.Run(context.Background(), `import urllib.request
return urllib.request.urlopen("http://api.test:`+port+`/", timeout=30).status`, nil); err != nil || string(r.Value) != "200" {
		t.Fatalf("session run: %v %+v", err, r)
	}
	_ = sess.Close(context.Background())
	mu.Lock()
	got = strings.Join(keys, ",")
	mu.Unlock()
	if !strings.HasSuffix(got, ",api.test=go-session") {
		t.Errorf("the session's run sent %s", got)
	}
	_, err = c.Run(context.Background(), "return 1", &coderun.RunOptions{
		Secrets: []coderun.Secret{{Hosts: []string{"elsewhere.test"}, Env: "KEY", Value: "v"}}})
	var rpcErr *jsonrpc2.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 || !strings.HasPrefix(rpcErr.Message, `secrets[0].hosts[0] "elsewhere.test"`) {
		t.Errorf("a secret outside the egress: %v", err)
	}
}
