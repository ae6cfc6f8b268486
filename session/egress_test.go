package session

import (
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
	"github.com/coderun-rpc/coderun-rpc/egress"
)

// TestC1044BypassNote: the text a blocked direct connection carries names
// the run's policy and the proxy in tier sandbox when the proxy listens in
// the run's namespace; says the run has no network when its policy allows
// nothing or the listener could not be made (a daemon that is not root);
// and is empty in tier process, where nothing is blocked. A long policy is
// cut to its first entries.
func TestC1044BypassNote(t *testing.T) {
	policy, _, rule := egress.Parse([]byte(`{"allow": ["api.example.com", "*.example.org:8443"]}`))
	if rule != "" {
		t.Fatal(rule)
	}
	listening := &worker{egressLn: &nsListener{}}
	sandboxed := &Manager{sandbox: &sandbox.Config{}}
	cases := []struct {
		name   string
		m      *Manager
		policy *egress.Policy
		w      *worker
		want   string
	}{
		{"process", &Manager{}, policy, listening, ""},
		{"allowed", sandboxed, policy, listening, "coderun: direct connections and name lookups are blocked; HTTP(S) goes through the egress proxy (HTTPS_PROXY) to: api.example.com, *.example.org:8443"},
		{"no policy", sandboxed, nil, &worker{}, "coderun: this run has no network access (egress policy: none)"},
		{"narrowed to none", sandboxed, &egress.Policy{}, listening, "coderun: this run has no network access (egress policy: none)"},
		{"no listener", sandboxed, policy, &worker{}, "coderun: this run has no network access (the egress proxy cannot listen in this sandbox)"},
	}
	for _, c := range cases {
		if got := c.m.bypassNote(c.policy, c.w); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	long := `{"allow": [` + strings.Repeat(`"a.example.com",`, 25) + `"b.example.com"]}`
	many, _, _ := egress.Parse([]byte(long))
	if got := sandboxed.bypassNote(many, listening); !strings.HasSuffix(got, "a.example.com and 6 more") {
		t.Errorf("26 entries: %q", got)
	}
}
