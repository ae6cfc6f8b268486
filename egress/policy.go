// Package egress is the daemon's policy for a run's outbound HTTP(S) and the
// forward proxy that enforces it (docs/containment.md §6).
//
// A Policy is a list of rules, each a host pattern with its ports (and, for
// plain HTTP, optionally its methods). The daemon's policy comes from the
// CODERUN_EGRESS file (ParseFile); a run may only narrow it (Policy.Narrow).
// The Proxy serves every run through one listener: a run's requests carry
// its child's token as proxy credentials, which select the run's Grant (its
// policy, budgets and audit).
package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Bounds of a policy file and of one rule list.
const (
	MaxFileBytes = 1 << 20
	MaxRules     = 1024
)

// defaultPorts are a rule's ports when its entry names none.
var defaultPorts = []uint16{80, 443}

// methods a rule may restrict plain HTTP requests to.
var knownMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Rule allows one host pattern on some ports.
type Rule struct {
	// Host is the lower-case name, or an IP address's canonical text.
	Host string
	// Wildcard: Host is a suffix ("*.example.com" matches one or more
	// labels before example.com, never example.com itself).
	Wildcard bool
	// Addr is Host as an address when the entry is an IP literal.
	Addr    netip.Addr
	Ports   []uint16
	Methods []string // plain HTTP only; empty: any (and HTTPS tunnels)
	// Private: names of this rule may resolve to loopback or private
	// addresses (an IP literal rule always reaches exactly its address).
	Private bool
}

// Policy is an allow-list and the secrets bound to its hosts; the zero
// Policy allows nothing.
type Policy struct {
	Rules   []Rule
	Secrets []Secret
}

// Empty reports whether p allows nothing.
func (p *Policy) Empty() bool { return p == nil || len(p.Rules) == 0 }

// Entries is p as the entries of a policy file, for initialize, --check
// and bindings/describe.
func (p *Policy) Entries() []string {
	if p == nil {
		return []string{}
	}
	out := make([]string, 0, len(p.Rules))
	for _, r := range p.Rules {
		out = append(out, r.String())
	}
	return out
}

// String renders r as its entry: host, ports (when not 80 and 443), then
// methods and the private flag in brackets.
func (r Rule) String() string {
	var b strings.Builder
	host := r.Host
	if r.Wildcard {
		host = "*." + host
	} else if r.Addr.Is6() {
		host = "[" + host + "]"
	}
	b.WriteString(host)
	if !slices.Equal(r.Ports, defaultPorts) {
		for i, p := range r.Ports {
			b.WriteString(map[bool]string{true: ":", false: ","}[i == 0])
			b.WriteString(strconv.Itoa(int(p)))
		}
	}
	if len(r.Methods) > 0 {
		b.WriteString(" (" + strings.Join(r.Methods, ",") + ")")
	}
	if r.Private {
		b.WriteString(" (private)")
	}
	return b.String()
}

// Allows reports whether r admits method to host:port; host is
// normalised (Normalize). CONNECT is admitted only by a rule without
// methods: the proxy cannot see the methods inside a tunnel.
func (r Rule) Allows(host string, port uint16, method string) bool {
	if !slices.Contains(r.Ports, port) {
		return false
	}
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
		return false
	}
	return r.matchesHost(host)
}

func (r Rule) matchesHost(host string) bool {
	if r.Wildcard {
		return strings.HasSuffix(host, "."+r.Host)
	}
	return host == r.Host
}

// Match is the first rule admitting method to host:port, if any.
func (p *Policy) Match(host string, port uint16, method string) (Rule, bool) {
	if p == nil {
		return Rule{}, false
	}
	for _, r := range p.Rules {
		if r.Allows(host, port, method) {
			return r, true
		}
	}
	return Rule{}, false
}

// covers reports whether c admits everything r admits.
func (c Rule) covers(r Rule) bool {
	switch {
	case r.Private && !c.Private && !c.Addr.IsValid():
		return false
	case len(c.Methods) > 0 && (len(r.Methods) == 0 || slices.ContainsFunc(r.Methods, func(m string) bool { return !slices.Contains(c.Methods, m) })):
		return false
	case slices.ContainsFunc(r.Ports, func(p uint16) bool { return !slices.Contains(c.Ports, p) }):
		return false
	case c.Wildcard:
		return strings.HasSuffix(r.Host, "."+c.Host)
	default:
		return !r.Wildcard && r.Host == c.Host
	}
}

// Narrow is the policy of a run that asks for the entries raw (a JSON
// array of entries, the shape of the file's "allow"): every rule must be
// covered by one of p's. A violation names the entry, "egress[i]".
func (p *Policy) Narrow(raw []byte) (*Policy, error) {
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, errors.New("egress must be an array of entries")
	}
	if len(entries) > MaxRules {
		return nil, fmt.Errorf("egress has more than %d entries", MaxRules)
	}
	run := &Policy{Rules: make([]Rule, 0, len(entries)), Secrets: p.secrets()}
	for i, e := range entries {
		at := "egress[" + strconv.Itoa(i) + "]"
		r, err := parseEntry(e)
		if err != nil {
			return nil, fmt.Errorf("%s %s", at, err)
		}
		if !slices.ContainsFunc(p.rules(), func(c Rule) bool { return c.covers(r) }) {
			return nil, fmt.Errorf("%s (%s) is not within the daemon's egress policy", at, r)
		}
		run.Rules = append(run.Rules, r)
	}
	return run, nil
}

func (p *Policy) rules() []Rule {
	if p == nil {
		return nil
	}
	return p.Rules
}

func (p *Policy) secrets() []Secret {
	if p == nil {
		return nil
	}
	return p.Secrets
}

// FileError is an invalid policy file: the file, the entry ("" for the
// file as a whole) and the rule it breaks.
type FileError struct {
	Path, Entry, Rule string
}

func (e *FileError) Error() string {
	if e.Entry == "" {
		return e.Path + ": " + e.Rule
	}
	return e.Path + ": " + e.Entry + ": " + e.Rule
}

// ParseFile reads and validates the policy file at path.
func ParseFile(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{Path: path, Rule: "cannot be read: " + errors.Unwrap(err).Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, &FileError{Path: path, Rule: "cannot be read: " + err.Error()}
	}
	if len(data) > MaxFileBytes {
		return nil, &FileError{Path: path, Rule: fmt.Sprintf("must be at most %d bytes", MaxFileBytes)}
	}
	p, entry, rule := Parse(data)
	if rule != "" {
		return nil, &FileError{Path: path, Entry: entry, Rule: rule}
	}
	return p, nil
}

// Parse validates a policy file's text: the policy, or the entry and the
// rule it breaks. A secret's "valueEnv" is read from the daemon's
// environment.
func Parse(data []byte) (p *Policy, entry, rule string) {
	var file struct {
		Allow   []json.RawMessage `json:"allow"`
		Secrets json.RawMessage   `json:"secrets"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, "", "must be a JSON object with an \"allow\" array: " + err.Error()
	}
	if dec.More() {
		return nil, "", "must hold one JSON object"
	}
	if len(file.Allow) > MaxRules {
		return nil, "allow", fmt.Sprintf("must have at most %d entries", MaxRules)
	}
	p = &Policy{Rules: make([]Rule, 0, len(file.Allow))}
	for i, e := range file.Allow {
		r, err := parseEntry(e)
		if err != nil {
			return nil, "allow[" + strconv.Itoa(i) + "]", err.Error()
		}
		p.Rules = append(p.Rules, r)
	}
	if len(file.Secrets) > 0 && string(file.Secrets) != "null" {
		secrets, err := ParseSecrets(file.Secrets, "secrets", p, os.LookupEnv)
		if err != nil {
			entry, rule, _ := strings.Cut(err.Error(), " ")
			return nil, entry, rule
		}
		p.Secrets = secrets
	}
	return p, "", ""
}

// parseEntry reads one entry: "host[:port]" or {"host": "host[:port]",
// "ports": [..], "methods": [..], "private": bool}.
func parseEntry(raw json.RawMessage) (Rule, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return parseHostPort(s)
	}
	var o struct {
		Host    *string  `json:"host"`
		Ports   []int    `json:"ports"`
		Methods []string `json:"methods"`
		Private bool     `json:"private"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil || o.Host == nil {
		return Rule{}, errors.New("must be a string \"host[:port]\" or an object with \"host\" and optional \"ports\", \"methods\", \"private\"")
	}
	r, err := parseHostPort(*o.Host)
	if err != nil {
		return r, err
	}
	if len(o.Ports) > 0 {
		if strings.Contains(strings.TrimPrefix(*o.Host, "["), ":") && !r.Addr.Is6() || strings.Contains(*o.Host, "]:") {
			return r, errors.New("names its port both in \"host\" and in \"ports\"")
		}
		r.Ports = nil
		for _, p := range o.Ports {
			if p < 1 || p > 65535 {
				return r, fmt.Errorf("port %d is not in 1..65535", p)
			}
			r.Ports = append(r.Ports, uint16(p))
		}
	}
	for _, m := range o.Methods {
		if !slices.Contains(knownMethods, m) {
			return r, fmt.Errorf("method %q is not one of %s", m, strings.Join(knownMethods, ", "))
		}
		r.Methods = append(r.Methods, m)
	}
	r.Private = o.Private
	return r, nil
}

// parseHostPort reads "host", "host:port", "*.suffix[:port]", an IPv4
// literal or "[IPv6][:port]".
func parseHostPort(s string) (Rule, error) {
	r := Rule{Ports: defaultPorts}
	if a, err := netip.ParseAddr(s); err == nil && a.Is6() {
		return r, errors.New("an IPv6 address must be written in brackets, [addr]")
	}
	host, port := s, ""
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.HasSuffix(s, "]") {
		host, port = s[:i], s[i+1:]
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return r, fmt.Errorf("port %q is not in 1..65535", port)
		}
		r.Ports = []uint16{uint16(n)}
	}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		a, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return r, fmt.Errorf("%q is not an IPv6 address", host)
		}
		r.Host, r.Addr = a.String(), a
		return r, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		r.Host, r.Addr = a.String(), a
		return r, nil
	}
	if suffix, ok := strings.CutPrefix(host, "*."); ok {
		if strings.Count(suffix, ".") < 1 {
			return r, errors.New("a wildcard must be followed by at least two labels (*.example.com)")
		}
		r.Wildcard, host = true, suffix
	}
	name, ok := Normalize(host)
	if !ok {
		return r, fmt.Errorf("%q is not a host name (letters, digits, hyphens and dots; * only as a leading \"*.\")", host)
	}
	if isNumeric(name) {
		return r, fmt.Errorf("%q is not a host name nor a dotted IPv4 address", host)
	}
	r.Host = name
	return r, nil
}

// Normalize is host as rules compare it: lower case, without a trailing
// dot; ok is false when host is not a DNS name of letters, digits and
// hyphens (at most 253 bytes, labels of 1 to 63).
func Normalize(host string) (string, bool) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" || len(host) > 253 {
		return "", false
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", false
			}
		}
	}
	return host, true
}

// isNumeric: the last label is all digits (a decimal, octal or shortened
// IPv4 form such as 2130706433 or 127.1, which resolvers read as an
// address): never a name.
func isNumeric(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	return strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x")
}
