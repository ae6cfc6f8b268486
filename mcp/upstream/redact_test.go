package upstream

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// Redact puts back the ${VAR} reference wherever the value it expanded to
// (as written, query- or path-escaped) would leave the daemon, the longest
// value first; a server's errors are redacted.
func TestRedact(t *testing.T) {
	env := map[string]string{"KEY": "s3cr3t/k+y", "TOKEN": "tok", "LONG": "tok-and-more"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	specs, err := ParseConfig("mcp.json", []byte(`{"mcpServers":{"web":{"url":"http://127.0.0.1:9/mcp?api_key=${KEY}",`+
		`"headers":{"Authorization":"Bearer ${TOKEN}","X":"${LONG}"}}}}`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	s := specs[0]
	for text, want := range map[string]string{
		`Post "http://127.0.0.1:9/mcp?api_key=s3cr3t/k+y": refused`: `Post "http://127.0.0.1:9/mcp?api_key=${KEY}": refused`,
		"api_key=s3cr3t%2Fk%2By":                                    "api_key=${KEY}",
		"bearer tok, then tok-and-more":                             "bearer ${TOKEN}, then ${LONG}",
		"nothing of the configuration in here":                      "nothing of the configuration in here",
	} {
		if got := s.Redact(text); got != want {
			t.Errorf("Redact(%q) = %q, want %q", text, got, want)
		}
	}
	srv := newServer(s, slog.New(slog.DiscardHandler), nil, Caps{})
	if got := srv.fail(errors.New("dial http://127.0.0.1:9/mcp?api_key=s3cr3t/k+y")).Error(); strings.Contains(got, "s3cr3t") {
		t.Errorf("a server error shows the secret: %s", got)
	}
}
