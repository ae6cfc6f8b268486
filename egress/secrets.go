package egress

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Bounds of secrets.
const (
	MaxSecrets        = 64
	MaxSecretHosts    = 64
	MaxSecretValue    = 8 << 10
	maxSecretNameSize = 64
)

// Secret is a credential the proxy adds to a run's requests to its hosts;
// the run never holds Value. Exactly one of Header, Query and Env is set.
type Secret struct {
	// Hosts are the host patterns the secret is bound to (any port).
	Hosts []Rule
	// Header: the proxy sets this header to Value on every request.
	Header string
	// Query: the proxy sets this query parameter to Value on every request.
	Query string
	// Env: the run's environment has this variable set to a per-run
	// placeholder, which the proxy replaces with Value in the header values
	// of requests to Hosts and refuses on requests to other hosts.
	Env   string
	Value string
}

// boundTo reports whether s applies to host (normalised).
func (s Secret) boundTo(host string) bool {
	return slices.ContainsFunc(s.Hosts, func(r Rule) bool { return r.matchesHost(host) })
}

// describe is s without its value, for initialize, --check and describe:
// "header Authorization for api.github.com" and the like.
func (s Secret) describe() string {
	kind, name := "header", s.Header
	switch {
	case s.Query != "":
		kind, name = "query", s.Query
	case s.Env != "":
		kind, name = "env", s.Env
	}
	hosts := make([]string, len(s.Hosts))
	for i, h := range s.Hosts {
		hosts[i] = hostText(h)
	}
	return kind + " " + name + " for " + strings.Join(hosts, ", ")
}

// hostText is a secret host rule as written (no ports).
func hostText(r Rule) string {
	switch {
	case r.Wildcard:
		return "*." + r.Host
	case r.Addr.Is6():
		return "[" + r.Host + "]"
	}
	return r.Host
}

// SecretsText describes every secret of p, never a value.
func (p *Policy) SecretsText() []string {
	out := []string{}
	if p == nil {
		return out
	}
	for _, s := range p.Secrets {
		out = append(out, s.describe())
	}
	return out
}

// deniedEnv are variable names a secret may not set: the interpreter's, the
// loader's, the proxy's and the certificate settings the daemon sets.
var deniedEnv = []string{"PATH", "HOME", "TMPDIR", "PWD", "SHELL", "USER", "LANG", "TERM",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}

// deniedEnvPrefixes are prefixes of names a secret may not set.
var deniedEnvPrefixes = []string{"PYTHON", "LD_", "SSL_", "PIP_", "UV_", "MPL", "CODERUN_", "OPENBLAS_", "OMP_", "MKL_"}

// deniedHeaders are header names a secret may not set: framing, routing
// and the proxy's own.
var deniedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te",
	"Trailer", "Keep-Alive", "Expect", "Cookie2"}

// checkEnvName is the fixed rule for a secret's variable: [A-Z_][A-Z0-9_]*,
// at most 64 bytes, none of deniedEnv nor deniedEnvPrefixes.
func checkEnvName(n string) error {
	if n == "" || len(n) > maxSecretNameSize || n[0] >= '0' && n[0] <= '9' ||
		strings.Trim(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
		return fmt.Errorf("%q must be 1 to %d of A-Z, 0-9 and _, not starting with a digit", n, maxSecretNameSize)
	}
	if slices.Contains(deniedEnv, n) || slices.ContainsFunc(deniedEnvPrefixes, func(p string) bool { return strings.HasPrefix(n, p) }) {
		return fmt.Errorf("%q is reserved (PATH, HOME, TMPDIR, the proxy and certificate variables, PYTHON*, LD_*, SSL_*, PIP_*, UV_*, MPL*, CODERUN_*)", n)
	}
	return nil
}

// checkHeaderName: an HTTP token of at most 64 bytes, not a framing,
// routing or proxy header.
func checkHeaderName(n string) error {
	if len(n) > maxSecretNameSize || !httpguts.ValidHeaderFieldName(n) {
		return fmt.Errorf("%q must be an HTTP header name (token characters, 1 to %d bytes)", n, maxSecretNameSize)
	}
	c := strings.ToLower(n)
	if strings.HasPrefix(c, "proxy-") || slices.ContainsFunc(deniedHeaders, func(d string) bool { return strings.EqualFold(d, n) }) {
		return fmt.Errorf("%q is reserved (Host, Content-Length, Transfer-Encoding, Connection, Upgrade, TE, Trailer, Keep-Alive, Expect, Proxy-*)", n)
	}
	return nil
}

// checkQueryName: 1 to 64 unreserved URL characters.
func checkQueryName(n string) error {
	if n == "" || len(n) > maxSecretNameSize ||
		strings.Trim(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") != "" {
		return fmt.Errorf("%q must be 1 to %d of letters, digits and -._~", n, maxSecretNameSize)
	}
	return nil
}

// checkValue: 1 to MaxSecretValue bytes, a valid header field value (no
// CR, LF, NUL nor other controls but tab). The error never shows the value.
func checkValue(v string) error {
	if v == "" || len(v) > MaxSecretValue {
		return fmt.Errorf("must be 1 to %d bytes", MaxSecretValue)
	}
	if !httpguts.ValidHeaderFieldValue(v) || strings.TrimSpace(v) != v {
		return errors.New("must not hold CR, LF, NUL or other control characters, nor start or end with a space")
	}
	return nil
}

// secretEntry is one entry of "secrets" as written.
type secretEntry struct {
	Hosts    []string `json:"hosts"`
	Header   *string  `json:"header"`
	Query    *string  `json:"query"`
	Env      *string  `json:"env"`
	Value    *string  `json:"value"`
	ValueEnv *string  `json:"valueEnv"`
}

// ParseSecrets reads raw, a JSON array of secret entries, against allow
// (every host of a secret must be one allow admits on some port). lookup
// reads "valueEnv" (the daemon's environment; nil: "valueEnv" is refused).
// A violation names its entry, prefix+"[i]" (its member when one is at
// fault), and the rule; it never holds a value.
func ParseSecrets(raw []byte, prefix string, allow *Policy, lookup func(string) (string, bool)) ([]Secret, error) {
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("%s must be an array of entries", prefix)
	}
	if len(entries) > MaxSecrets {
		return nil, fmt.Errorf("%s has more than %d entries", prefix, MaxSecrets)
	}
	out := make([]Secret, 0, len(entries))
	names := map[string]bool{}
	for i, e := range entries {
		at := prefix + "[" + strconv.Itoa(i) + "]"
		s, member, err := parseSecret(e, allow, lookup)
		if err != nil {
			if member != "" {
				at += "." + member
			}
			return nil, fmt.Errorf("%s %w", at, err)
		}
		// Header and query secrets of one name may bind different hosts;
		// a variable holds one placeholder.
		if s.Env != "" && names[s.Env] {
			return nil, fmt.Errorf("%s.env %q is set by an earlier entry", at, s.Env)
		}
		names[s.Env] = true
		out = append(out, s)
	}
	return out, nil
}

// parseSecret reads one entry: the secret, or the member at fault and why.
func parseSecret(raw json.RawMessage, allow *Policy, lookup func(string) (string, bool)) (Secret, string, error) {
	var s Secret
	var e secretEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return s, "", errors.New("must be an object with \"hosts\", one of \"header\", \"query\", \"env\", and \"value\" or \"valueEnv\"")
	}
	if len(e.Hosts) == 0 || len(e.Hosts) > MaxSecretHosts {
		return s, "hosts", fmt.Errorf("must list 1 to %d hosts", MaxSecretHosts)
	}
	for j, h := range e.Hosts {
		r, err := parseSecretHost(h, allow)
		if err != nil {
			return s, "hosts[" + strconv.Itoa(j) + "]", err
		}
		s.Hosts = append(s.Hosts, r)
	}
	kinds := 0
	for _, k := range []*string{e.Header, e.Query, e.Env} {
		if k != nil {
			kinds++
		}
	}
	if kinds != 1 {
		return s, "", errors.New("must have exactly one of \"header\", \"query\" and \"env\"")
	}
	var err error
	switch {
	case e.Header != nil:
		s.Header, err = *e.Header, checkHeaderName(*e.Header)
		if err != nil {
			return s, "header", err
		}
	case e.Query != nil:
		s.Query, err = *e.Query, checkQueryName(*e.Query)
		if err != nil {
			return s, "query", err
		}
	default:
		s.Env, err = *e.Env, checkEnvName(*e.Env)
		if err != nil {
			return s, "env", err
		}
	}
	member := "value"
	switch {
	case (e.Value == nil) == (e.ValueEnv == nil):
		return s, "", errors.New("must have exactly one of \"value\" and \"valueEnv\"")
	case e.Value != nil:
		s.Value = *e.Value
	case lookup == nil:
		return s, "valueEnv", errors.New("is read from the daemon's environment, so only the daemon's policy file may use it")
	default:
		member = "valueEnv"
		v, ok := lookup(*e.ValueEnv)
		if !ok {
			return s, member, fmt.Errorf("names %q, which is not set in the daemon's environment", *e.ValueEnv)
		}
		s.Value = v
	}
	if err := checkValue(s.Value); err != nil {
		return s, member, err
	}
	return s, "", nil
}

// parseSecretHost reads a secret's host pattern: a name, "*.suffix" or an
// address, without a port, that allow admits on some port.
func parseSecretHost(h string, allow *Policy) (Rule, error) {
	r, err := parseHostPort(h)
	if err != nil {
		return r, err
	}
	if !slices.Equal(r.Ports, defaultPorts) || strings.HasSuffix(h, ":80") || strings.HasSuffix(h, ":443") {
		return r, errors.New("a secret's host has no port (it applies on every port the allow list admits)")
	}
	if !slices.ContainsFunc(allow.rules(), func(c Rule) bool { return c.coversHost(r) }) {
		return r, fmt.Errorf("%q is not within the egress allow list", hostText(r))
	}
	return r, nil
}

// coversHost reports whether c's host pattern admits every host r's does.
func (c Rule) coversHost(r Rule) bool {
	if c.Wildcard {
		return strings.HasSuffix(r.Host, "."+c.Host) || r.Wildcard && r.Host == c.Host
	}
	return !r.Wildcard && r.Host == c.Host
}

// placeholderPrefix starts every placeholder: a program (and a reader of
// its output) can tell one from a credential.
const placeholderPrefix = "coderun-placeholder-"

// newPlaceholder is a fresh placeholder: the prefix and 128 random bits in
// hex (URL- and header-safe, so it travels unescaped).
func newPlaceholder() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return placeholderPrefix + hex.EncodeToString(b)
}

// Bound are a run's secrets with the placeholders of its env secrets.
type Bound struct {
	secrets      []Secret
	placeholders []string // parallel to secrets; "" for header and query secrets
}

// Bind gives each env secret of secrets a fresh placeholder.
func Bind(secrets []Secret) *Bound {
	b := &Bound{secrets: secrets, placeholders: make([]string, len(secrets))}
	for i, s := range secrets {
		if s.Env != "" {
			b.placeholders[i] = newPlaceholder()
		}
	}
	return b
}

// Env is the run's environment entries: NAME=placeholder per env secret.
func (b *Bound) Env() []string {
	if b == nil {
		return nil
	}
	var out []string
	for i, s := range b.secrets {
		if s.Env != "" {
			out = append(out, s.Env+"="+b.placeholders[i])
		}
	}
	return out
}

// intercepts reports whether a tunnel to host must be terminated: a secret
// is bound to it. Other tunnels stay opaque (a placeholder inside one
// travels unseen, and is worth nothing without the proxy).
func (b *Bound) intercepts(host string) bool {
	return b != nil && slices.ContainsFunc(b.secrets, func(s Secret) bool { return s.boundTo(host) })
}

// errPlaceholder refuses a request carrying a placeholder to a host its
// secret is not bound to.
var errPlaceholder = errors.New("egress refused: the request carries a secret's placeholder (an env secret's variable) to a host the secret is not bound to")

// check refuses (errPlaceholder) a request to host whose target (its
// request line's URI) or headers carry the placeholder of a secret not
// bound to host. A body is not read: see docs/containment.md §6.
func (b *Bound) check(host, target string, header http.Header) error {
	if b == nil {
		return nil
	}
	for i, s := range b.secrets {
		ph := b.placeholders[i]
		if ph != "" && !s.boundTo(host) && (strings.Contains(target, ph) || headersContain(header, ph)) {
			return errPlaceholder
		}
	}
	return nil
}

// plainAllowed checks a plain-HTTP request r to t against the run's
// secrets: no placeholder for another host (check), and no secret sent in
// clear text across the internet: a host with secrets is reached over
// plain HTTP only through a rule that names its address or says
// "private" (a loopback or internal upstream the operator named).
func (g *Grant) plainAllowed(t target, r *http.Request) error {
	if err := g.bound.check(t.host, r.RequestURI, r.Header); err != nil {
		return err
	}
	if g.bound.intercepts(t.host) && !t.rule.Private && !t.rule.Addr.IsValid() {
		return fmt.Errorf("egress refused: %s has secrets, which the proxy sends over HTTPS only (use https://)", t.host)
	}
	return nil
}

// inject rewrites a checked request to host, just before it is sent:
// header and query secrets bound to host set (replacing what the program
// sent), env secrets' placeholders replaced by their values in header
// values only. Never in the query: a bound host that echoes its query (a
// search page, an error naming a bad parameter) would show the value to
// the program that put the placeholder there.
func (b *Bound) inject(host string, header http.Header, rawQuery *string) {
	if b == nil {
		return
	}
	for i, s := range b.secrets {
		if !s.boundTo(host) {
			continue
		}
		switch {
		case s.Header != "":
			setHeader(header, s.Header, s.Value)
		case s.Query != "":
			q, _ := url.ParseQuery(*rawQuery) // a malformed pair is dropped, as servers do
			q.Set(s.Query, s.Value)
			*rawQuery = q.Encode()
		default:
			ph := b.placeholders[i]
			for k, vs := range header {
				for j, v := range vs {
					header[k][j] = strings.ReplaceAll(v, ph, s.Value)
				}
			}
		}
	}
}

// redactedValue stands for a header or query secret's value in a response.
const redactedValue = "coderun-secret-redacted"

// redact rewrites the headers of a response from host before the program
// reads them (redactor). An upstream that redirects keeping the query
// (Location: …?api_key=…) thus shows no value; a body is not rewritten
// (containment-secrets.md §5).
func (b *Bound) redact(host string, header http.Header) {
	r := b.redactor(host)
	if r == nil {
		return
	}
	for k, vs := range header {
		for j, v := range vs {
			header[k][j] = r.Replace(v)
		}
	}
}

// redactText is msg, a reason the program reads (an upstream's failure may
// quote what it received), with host's secrets redacted (redactor).
func (b *Bound) redactText(host, msg string) string {
	if r := b.redactor(host); r != nil {
		return r.Replace(msg)
	}
	return msg
}

// redactor replaces each value of a secret bound to host, as sent and in
// the forms an upstream or an error may echo it (query-escaped,
// path-escaped, Go-quoted), with the secret's placeholder (an env secret:
// a redirect followed with it works as before) or redactedValue; nil when
// no secret is bound to host.
func (b *Bound) redactor(host string) *strings.Replacer {
	if b == nil {
		return nil
	}
	var pairs []string
	for i, s := range b.secrets {
		if s.boundTo(host) {
			with := cmp.Or(b.placeholders[i], redactedValue)
			quoted := strconv.Quote(s.Value)
			pairs = append(pairs, s.Value, with, url.QueryEscape(s.Value), with, url.PathEscape(s.Value), with,
				quoted[1:len(quoted)-1], with)
		}
	}
	if pairs == nil {
		return nil
	}
	return strings.NewReplacer(pairs...)
}

func headersContain(h http.Header, ph string) bool {
	for k, vs := range h {
		if strings.Contains(k, ph) || slices.ContainsFunc(vs, func(v string) bool { return strings.Contains(v, ph) }) {
			return true
		}
	}
	return false
}

// setHeader sets name to v, dropping every spelling of name the program
// sent (a program's own value must not ride along).
func setHeader(h http.Header, name, v string) {
	for k := range h {
		if strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
	h[http.CanonicalHeaderKey(name)] = []string{v}
}

// WithSecrets is p with a client's secrets added (raw: a JSON array of
// entries, "secrets"): each host must lie within p's allow list, an env
// name may not be one p's secrets set, and "valueEnv" is refused (the
// daemon's environment is not the client's to read). A violation names
// the entry, "secrets[i]", and never holds a value.
func (p *Policy) WithSecrets(raw []byte) (*Policy, error) {
	own, err := ParseSecrets(raw, "secrets", p, nil)
	if err != nil {
		return nil, err
	}
	for i, s := range own {
		if s.Env != "" && slices.ContainsFunc(p.secrets(), func(d Secret) bool { return d.Env == s.Env }) {
			return nil, fmt.Errorf("secrets[%d].env %q is set by the daemon's egress policy", i, s.Env)
		}
	}
	return &Policy{Rules: p.rules(), Secrets: append(slices.Clone(p.secrets()), own...)}, nil
}
