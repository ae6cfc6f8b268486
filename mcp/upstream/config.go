package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Spec is one configured upstream server: a key of the file's "mcpServers"
// object and how to reach it (Command for stdio, URL for streamable HTTP).
type Spec struct {
	Key     string // the key in the file
	Global  string // the key in identifier form (non-identifier characters → "_")
	Command string
	Args    []string
	Env     map[string]string // added to the daemon's environment
	URL     string
	Headers map[string]string // sent with every HTTP request
	// secrets are the values ${VAR} references expanded to, each with the
	// reference itself: Redact puts the reference back wherever a value
	// would leave the daemon (an error's text, the log).
	secrets []secret
}

type secret struct{ value, ref string }

// Redact is text with every value a ${VAR} of the server's configuration
// expanded to — as written, query-escaped or path-escaped, as a URL in an
// error may show it — replaced by its reference (${VAR}).
func (s Spec) Redact(text string) string {
	for _, x := range s.secrets {
		for _, form := range []string{x.value, url.QueryEscape(x.value), url.PathEscape(x.value)} {
			text = strings.ReplaceAll(text, form, x.ref)
		}
	}
	return text
}

// ConfigError is a configuration file that cannot be used; its message names
// the file and, when one is at fault, the server.
type ConfigError struct{ msg string }

func (e *ConfigError) Error() string { return e.msg }

// LoadConfig reads the file at path in the common {"mcpServers": {...}} form.
// lookup expands ${VAR} in url, headers and env values (the daemon passes
// os.LookupEnv; this package never reads the environment itself). Servers
// come back sorted by key.
func LoadConfig(path string, lookup func(string) (string, bool)) ([]Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{fmt.Sprintf("mcp config %s: cannot read: %v", path, unwrapPath(err))}
	}
	return ParseConfig(path, data, lookup)
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

type fileEntry struct {
	Command *string           `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     *string           `json:"url"`
	Headers map[string]string `json:"headers"`
	Type    string            `json:"type"`
}

// ParseConfig is LoadConfig on the file's bytes; name is used in messages.
func ParseConfig(name string, data []byte, lookup func(string) (string, bool)) ([]Spec, error) {
	fail := func(format string, a ...any) error {
		return &ConfigError{"mcp config " + name + ": " + fmt.Sprintf(format, a...)}
	}
	var file struct {
		Servers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fail("not valid JSON: %v", err)
	}
	if file.Servers == nil {
		return nil, fail(`no "mcpServers" object`)
	}
	keys := make([]string, 0, len(file.Servers))
	for k := range file.Servers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	specs := make([]Spec, 0, len(keys))
	byGlobal := map[string]string{}
	for _, k := range keys {
		s, err := parseEntry(k, file.Servers[k], lookup)
		if err != nil {
			return nil, fail("%v", err)
		}
		if other, dup := byGlobal[s.Global]; dup {
			return nil, fail("servers %q and %q both become the global %q; rename one", other, k, s.Global)
		}
		byGlobal[s.Global] = k
		specs = append(specs, s)
	}
	return specs, nil
}

func parseEntry(key string, raw json.RawMessage, lookup func(string) (string, bool)) (Spec, error) {
	s := Spec{Key: key, Global: Identifier(key)}
	var e fileEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&e); err != nil {
		return s, fmt.Errorf("server %q: %v", key, err)
	}
	switch {
	case e.Command != nil && e.URL != nil:
		return s, fmt.Errorf("server %q: give either \"command\" or \"url\", not both", key)
	case e.Command != nil && *e.Command == "":
		return s, fmt.Errorf("server %q: \"command\" is empty", key)
	case e.Command != nil:
		s.Command, s.Args = *e.Command, e.Args
	case e.URL != nil:
		s.URL = *e.URL
	default:
		return s, fmt.Errorf("server %q: needs \"command\" (stdio) or \"url\" (streamable HTTP)", key)
	}
	var err error
	if s.URL, err = expand(key, "url", s.URL, lookup, &s.secrets); err != nil {
		return s, err
	}
	if e.URL != nil && !isHTTPURL(s.URL) {
		// The file's text, not the expanded one: a ${VAR} may hold a secret.
		return s, fmt.Errorf("server %q: \"url\" must be an absolute http or https URL, got %q", key, *e.URL)
	}
	if s.Headers, err = expandAll(key, "headers", e.Headers, lookup, &s.secrets); err != nil {
		return s, err
	}
	if s.Env, err = expandAll(key, "env", e.Env, lookup, &s.secrets); err != nil {
		return s, err
	}
	// The longest first, so that a value holding another is replaced whole.
	slices.SortFunc(s.secrets, func(a, b secret) int { return len(b.value) - len(a.value) })
	return s, nil
}

// isHTTPURL reports whether text is an absolute http or https URL with a
// host, the only kind a streamable-HTTP server is reached at.
func isHTTPURL(text string) bool {
	u, err := url.Parse(text)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces each ${VAR} with the variable's value, adding each
// non-empty value to secrets; an unset variable is an error naming it, so a
// secret missing from the environment is not sent as an empty header.
func expand(key, field, text string, lookup func(string) (string, bool), secrets *[]secret) (string, error) {
	var missing string
	out := varRef.ReplaceAllStringFunc(text, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := lookup(name)
		if !ok && missing == "" {
			missing = name
		}
		if v != "" {
			*secrets = append(*secrets, secret{value: v, ref: ref})
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("server %q: %s refers to ${%s}, which is not set", key, field, missing)
	}
	return out, nil
}

func expandAll(key, field string, m map[string]string, lookup func(string) (string, bool), secrets *[]secret) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		x, err := expand(key, field+"."+k, v, lookup, secrets)
		if err != nil {
			return nil, err
		}
		out[k] = x
	}
	return out, nil
}

// Identifier is name in identifier form: every character outside
// [A-Za-z0-9_] becomes "_", and a leading digit (or an empty name) gets a
// "_" in front.
func Identifier(name string) string {
	var b strings.Builder
	for i, r := range name {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
		default:
			r = '_'
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}
