package upstream_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
)

func lookup(name string) (string, bool) {
	if name == "TOKEN" {
		return "s3cret", true
	}
	return "", false
}

func TestParseConfig(t *testing.T) {
	specs, err := upstream.ParseConfig("f.json", []byte(`{"mcpServers": {
		"time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
		"my-api": {"url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}}}`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := []upstream.Spec{
		{Key: "my-api", Global: "my_api", URL: "https://example.test/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}, Env: map[string]string{}},
		{Key: "time", Global: "time", Command: "uvx", Args: []string{"mcp-server-time"}, Env: map[string]string{"TZ": "UTC"}, Headers: map[string]string{}},
	}
	// Compared by their exported fields: what a ${VAR} expanded to is kept
	// apart, for Redact.
	got, _ := json.Marshal(specs)
	if exp, _ := json.Marshal(want); string(got) != string(exp) {
		t.Errorf("got %s\nwant %s", got, exp)
	}
	if r := specs[0].Redact("Bearer s3cret"); r != "Bearer ${TOKEN}" {
		t.Errorf("Redact = %q", r)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"malformed", `{"mcpServers": {`, "mcp config f.json: not valid JSON"},
		{"no servers", `{}`, `no "mcpServers" object`},
		{"same global twice", `{"mcpServers": {"a-b": {"command": "x"}, "a_b": {"command": "y"}}}`,
			`servers "a-b" and "a_b" both become the global "a_b"`},
		{"neither", `{"mcpServers": {"s": {}}}`, `server "s": needs "command" (stdio) or "url"`},
		{"both", `{"mcpServers": {"s": {"command": "x", "url": "http://h"}}}`, `server "s": give either "command" or "url"`},
		{"unset variable", `{"mcpServers": {"s": {"url": "http://h", "headers": {"X": "${NOPE}"}}}}`,
			`server "s": headers.X refers to ${NOPE}, which is not set`},
		{"wrong type", `{"mcpServers": {"s": {"command": 5}}}`, `server "s": json: cannot unmarshal number`},
		{"empty url", `{"mcpServers": {"s": {"url": ""}}}`, `server "s": "url" must be an absolute http or https URL, got ""`},
		{"relative url", `{"mcpServers": {"s": {"url": "/mcp"}}}`, `server "s": "url" must be an absolute http or https URL, got "/mcp"`},
		{"other scheme", `{"mcpServers": {"s": {"url": "ftp://h/mcp"}}}`, `got "ftp://h/mcp"`},
		{"secret kept out", `{"mcpServers": {"s": {"url": "${TOKEN}"}}}`, `must be an absolute http or https URL, got "${TOKEN}"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := upstream.ParseConfig("f.json", []byte(c.text), lookup)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	_, err := upstream.LoadConfig(filepath.Join(t.TempDir(), "missing.json"), lookup)
	if err == nil || !strings.Contains(err.Error(), "missing.json: cannot read: no such file or directory") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestIdentifier(t *testing.T) {
	for in, want := range map[string]string{"get-sum": "get_sum", "9lives": "_9lives", "": "_", "ok_1": "ok_1", "é": "_"} {
		if got := upstream.Identifier(in); got != want {
			t.Errorf("Identifier(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseConfig: any file gives either an error naming the file, or
// servers sorted by key, each reached one way (a command, or an http(s)
// URL), under distinct identifier globals.
func FuzzParseConfig(f *testing.F) {
	f.Add(`{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "${TOKEN}"}}}}`)
	f.Add(`{"mcpServers": {"my-api": {"url": "https://example.test/mcp", "headers": {"A": "Bearer ${TOKEN}"}}, "9": {"command": "x"}}}`)
	f.Add(`{"mcpServers": {"a-b": {"command": "x"}, "a_b": {"url": "http://h"}}}`)
	f.Fuzz(func(t *testing.T, text string) {
		specs, err := upstream.ParseConfig("f.json", []byte(text), lookup)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "mcp config f.json: ") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		globals := map[string]bool{}
		for i, s := range specs {
			if i > 0 && specs[i-1].Key >= s.Key {
				t.Fatalf("not sorted by key: %q then %q", specs[i-1].Key, s.Key)
			}
			if (s.Command == "") == (s.URL == "") {
				t.Fatalf("server %q: command %q and url %q", s.Key, s.Command, s.URL)
			}
			if s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
				t.Fatalf("server %q: url %q", s.Key, s.URL)
			}
			if s.Global != upstream.Identifier(s.Key) || globals[s.Global] {
				t.Fatalf("server %q: global %q (taken: %v)", s.Key, s.Global, globals[s.Global])
			}
			globals[s.Global] = true
		}
	})
}
