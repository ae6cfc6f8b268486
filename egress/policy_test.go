package egress

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestC800PolicyFile: a valid file's rules, and each invalid entry named
// with the rule it breaks.
func TestC800PolicyFile(t *testing.T) {
	p, entry, rule := Parse([]byte(`{"allow": ["API.github.com.", "*.githubusercontent.com", "127.0.0.1:8080",
		"[::1]:9", {"host": "h.example.org", "ports": [8443], "methods": ["GET"]}, {"host": "db.internal.test", "private": true}]}`))
	if rule != "" {
		t.Fatalf("valid file refused: %s: %s", entry, rule)
	}
	want := []string{"api.github.com", "*.githubusercontent.com", "127.0.0.1:8080", "[::1]:9",
		"h.example.org:8443 (GET)", "db.internal.test (private)"}
	if got := p.Entries(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("entries %q, want %q", got, want)
	}
	for _, c := range []struct{ text, entry, rule string }{
		{`{"allow": ["*"]}`, "allow[0]", "not a host name"},
		{`{"allow": ["*.com"]}`, "allow[0]", "at least two labels"},
		{`{"allow": ["ok.example", "a..b"]}`, "allow[1]", "not a host name"},
		{`{"allow": ["x.example:0"]}`, "allow[0]", "not in 1..65535"},
		{`{"allow": ["x.example:99999"]}`, "allow[0]", "not in 1..65535"},
		{`{"allow": ["2130706433"]}`, "allow[0]", "nor a dotted IPv4"},
		{`{"allow": ["::1"]}`, "allow[0]", "in brackets"},
		{`{"allow": [{"host": "x.example", "methods": ["TRACE"]}]}`, "allow[0]", "method \"TRACE\""},
		{`{"allow": [{"host": "x.example", "bogus": 1}]}`, "allow[0]", "must be a string"},
		{`{"allow": [], "secrets": [{"hosts": ["a.example"], "header": "A", "value": "v"}]}`, "secrets[0].hosts[0]", "not within the egress allow list"},
		{`{"allowed": []}`, "", "unknown field"},
		{`[]`, "", "must be a JSON object"},
	} {
		_, entry, rule := Parse([]byte(c.text))
		if entry != c.entry || !strings.Contains(rule, c.rule) {
			t.Errorf("%s: got %q %q, want %q containing %q", c.text, entry, rule, c.entry, c.rule)
		}
	}
	path := filepath.Join(t.TempDir(), "egress.json")
	if err := os.WriteFile(path, []byte(`{"allow": ["a.example", "bad host"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ParseFile(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+": allow[1]: ") {
		t.Fatalf("ParseFile error %v, want one naming the file and allow[1]", err)
	}
}

// TestC801Narrow: a run's entries must each be within one daemon rule.
func TestC801Narrow(t *testing.T) {
	daemon, _, rule := Parse([]byte(`{"allow": ["*.example.com", "api.example.org:443", {"host": "w.example.net", "methods": ["GET", "HEAD"]}]}`))
	if rule != "" {
		t.Fatal(rule)
	}
	for _, ok := range []string{`[]`, `["a.example.com"]`, `["*.b.example.com:443"]`, `["api.example.org:443"]`,
		`[{"host": "w.example.net", "methods": ["GET"]}]`} {
		if _, err := daemon.Narrow([]byte(ok)); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, c := range []struct{ text, msg string }{
		{`["example.com"]`, "egress[0] (example.com) is not within"},
		{`["a.example.com", "api.example.org"]`, "egress[1] (api.example.org) is not within"},
		{`["*.com.example.com:8080"]`, "egress[0]"},
		{`["w.example.net"]`, "egress[0]"},
		{`[{"host": "a.example.com", "private": true}]`, "egress[0]"},
		{`"a.example.com"`, "egress must be an array"},
		{`["a b"]`, "egress[0] \"a b\" is not a host name"},
	} {
		if _, err := daemon.Narrow([]byte(c.text)); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want %q", c.text, err, c.msg)
		}
	}
}
