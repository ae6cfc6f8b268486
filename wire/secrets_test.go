package wire

import (
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/egress"
)

// TestC1004RunSecrets: a run's secrets are validated against its effective
// egress (its own narrowing, else the daemon's): −32602 naming
// secrets[i].member and the rule, never the value; valid ones join the
// daemon's in the run's policy.
func TestC1004RunSecrets(t *testing.T) {
	daemon, entry, rule := egress.Parse([]byte(`{"allow": ["api.example.com", "other.example.com"],
		"secrets": [{"hosts": ["api.example.com"], "env": "DAEMON_KEY", "value": "d"}]}`))
	if rule != "" {
		t.Fatalf("%s: %s", entry, rule)
	}
	ok := `{"program":"1","secrets":[{"hosts":["api.example.com"],"header":"X-Key","value":"RUNSECRET"}]}`
	p, err := ValidateRunEgress([]byte(ok), cfgLimits, noPackages, daemon)
	if err != nil {
		t.Fatalf("valid secrets refused: %v", err)
	}
	got := p.Egress.(*egress.Policy).SecretsText()
	if strings.Join(got, "|") != "env DAEMON_KEY for api.example.com|header X-Key for api.example.com" {
		t.Errorf("run policy's secrets %q", got)
	}
	for _, c := range []struct{ params, msg string }{
		{`{"program":"1","secrets":{}}`, "secrets must be an array of entries"},
		{`{"program":"1","egress":["other.example.com"],"secrets":[{"hosts":["api.example.com"],"header":"X","value":"RUNSECRET"}]}`,
			`secrets[0].hosts[0] "api.example.com" is not within the egress allow list`},
		{`{"program":"1","secrets":[{"hosts":["api.example.com"],"header":"Host","value":"RUNSECRET"}]}`, `secrets[0].header "Host" is reserved`},
		{`{"program":"1","secrets":[{"hosts":["api.example.com"],"env":"DAEMON_KEY","value":"RUNSECRET"}]}`, `secrets[0].env "DAEMON_KEY" is set by the daemon's egress policy`},
		{`{"program":"1","secrets":[{"hosts":["api.example.com"],"env":"K","valueEnv":"HOME"}]}`, `secrets[0].valueEnv is read from the daemon's environment`},
		{`{"program":"1","secrets":[{"hosts":["api.example.com"],"query":"k","value":"RUNSECRET\n"}]}`, `secrets[0].value must not hold CR, LF`},
		{`{"program":"1","sessionId":"session-X","secrets":[{"hosts":["api.example.com"],"query":"k","value":"RUNSECRET"}]}`, "secrets are given to session/open for every run of the session"},
	} {
		_, err := ValidateRunEgress([]byte(c.params), cfgLimits, noPackages, daemon)
		if err == nil || !strings.HasPrefix(err.Error(), c.msg) || strings.Contains(err.Error(), "RUNSECRET") {
			t.Errorf("%s: %v, want %q", c.params, err, c.msg)
		}
	}
	if _, err := ValidateRunEgress([]byte(ok), cfgLimits, noPackages, nil); err == nil || !strings.Contains(err.Error(), "no egress policy") {
		t.Errorf("secrets without a daemon policy: %v", err)
	}
	// session/open: the same rules against the daemon's policy.
	sp, err := ValidateSessionOpen([]byte(`{"secrets":[{"hosts":["other.example.com"],"query":"k","value":"RUNSECRET"}]}`), cfgLimits, 1000, noPackages, daemon)
	if err != nil || len(sp.Egress.(*egress.Policy).Secrets) != 2 {
		t.Errorf("session/open secrets: %+v %v", sp, err)
	}
	if _, err := ValidateSessionOpen([]byte(`{"secrets":[{"hosts":["x.example.net"],"query":"k","value":"RUNSECRET"}]}`), cfgLimits, 1000, noPackages, daemon); err == nil ||
		err.Error() != `secrets[0].hosts[0] "x.example.net" is not within the egress allow list` {
		t.Errorf("session/open secret outside the policy: %v", err)
	}
}
