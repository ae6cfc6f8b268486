package config

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// rule is one variable's per-variable check (docs/configuration.md §3 step 1),
// applied alike to a set value and to a default.
type rule interface {
	// parse returns text's integer value (0 for a word or a path), or an
	// error whose text is the rule it breaks, exactly.
	parse(text string) (int64, error)
	// summary is the rule in --help's words.
	summary() string
}

// intRule is an integer variable: decimal digits only (no sign, no base
// prefix, no leading zero, no whitespace, no underscore; envconfig's own
// integer parsing would take base prefixes, Appendix B item 7), at least 1
// (0 when nonNegative) and at least floor, at most ceiling.
type intRule struct {
	nonNegative bool
	floor       int64  // 0: none
	floorWhy    string // why the floor, for its rule text
	ceiling     int64
	ceilingWhy  string // why the ceiling, for its rule text; "" for none
}

func positive(ceiling int64, why string) intRule { return intRule{ceiling: ceiling, ceilingWhy: why} }

// atLeast is r with a floor.
func (r intRule) atLeast(floor int64, why string) intRule {
	r.floor, r.floorWhy = floor, why
	return r
}

// count is a run count: its ceiling keeps it an exact JSON integer
// (initialize reports maxConcurrentRuns).
func count(nonNegative bool) intRule {
	return intRule{nonNegative: nonNegative, ceiling: protocol.CountCeiling}
}

func (r intRule) parse(text string) (int64, error) {
	v, ok := parseDecimal(text)
	switch {
	case !ok || (v == 0 && !r.nonNegative):
		return 0, errors.New("must be a " + r.kind())
	case v > r.ceiling:
		return 0, errors.New("must be at most " + itoa(r.ceiling) + parenthesized(r.ceilingWhy))
	case v < r.floor:
		return 0, errors.New("must be at least " + itoa(r.floor) + parenthesized(r.floorWhy))
	}
	return v, nil
}

func (r intRule) kind() string {
	if r.nonNegative {
		return "non-negative integer"
	}
	return "positive integer"
}

func (r intRule) summary() string {
	if r.floor > 0 {
		return "integer ≥ " + itoa(r.floor)
	}
	return r.kind()
}

func parenthesized(why string) string {
	if why == "" {
		return ""
	}
	return " (" + why + ")"
}

// parseDecimal accepts "0" or a digit string without a leading zero. One
// beyond int64 saturates, so it meets its variable's ceiling rule (every
// ceiling is below MaxInt64) rather than a spelling rule it obeys.
func parseDecimal(s string) (int64, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return math.MaxInt64, true
	}
	return v, err == nil
}

// wordRule is a variable restricted to a fixed set of words, listed quoted
// ("process" or "sandbox") or, for the log level, bare.
type wordRule struct {
	words  []string
	quoted bool
}

func (r wordRule) parse(text string) (int64, error) {
	for _, w := range r.words {
		if text == w {
			return 0, nil
		}
	}
	if r.quoted {
		return 0, errors.New("must be " + r.summary())
	}
	return 0, errors.New("must be one of " + strings.Join(r.words, ", "))
}

// summary lists the words: `"a", "b" or "c"`, or bare `a, b or c`.
func (r wordRule) summary() string {
	list := make([]string, len(r.words))
	for i, w := range r.words {
		list[i] = w
		if r.quoted {
			list[i] = strconv.Quote(w)
		}
	}
	last := len(list) - 1
	return strings.Join(list[:last], ", ") + " or " + list[last]
}

// interpreterRule is CODERUN_PYTHON_BIN's: any text is read here, and
// locatePython and probePython judge it in step 3, after the address-space room.
type interpreterRule struct{}

func (interpreterRule) parse(string) (int64, error) { return 0, nil }

func (interpreterRule) summary() string {
	return "path or bare name on PATH; CPython ≥ " + minPythonText
}

// fileRule is CODERUN_MCP_CONFIG's and CODERUN_EGRESS's: empty (none) or a
// regular file's path; what is wrong inside the file is reported by who
// parses it. what names the file's kind.
type fileRule struct{ what string }

func (r fileRule) parse(text string) (int64, error) {
	if text == "" {
		return 0, nil
	}
	st, err := os.Stat(text)
	if err != nil {
		return 0, errors.New("must name a readable " + r.what + ": " + errors.Unwrap(err).Error())
	}
	if !st.Mode().IsRegular() {
		return 0, errors.New("must name a readable " + r.what + ", not a directory or device")
	}
	return 0, nil
}

func (r fileRule) summary() string { return "path of an " + r.what + ", empty for none" }

// hostsRule is CODERUN_EGRESS_HOSTS's: empty, or name=address pairs
// separated by commas.
type hostsRule struct{}

func (hostsRule) parse(text string) (int64, error) {
	_, err := parseHosts(text)
	return 0, err
}

func (hostsRule) summary() string { return "name=address[,name=address…], empty for none" }

// parseHosts reads CODERUN_EGRESS_HOSTS: names as the egress policy
// compares them, addresses as IP literals.
func parseHosts(text string) (map[string]netip.Addr, error) {
	hosts := map[string]netip.Addr{}
	if text == "" {
		return hosts, nil
	}
	for pair := range strings.SplitSeq(text, ",") {
		name, addr, ok := strings.Cut(pair, "=")
		host, valid := egress.Normalize(name)
		a, err := netip.ParseAddr(addr)
		if !ok || !valid || err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("must be name=address pairs separated by commas; %q is not one", pair)
		}
		hosts[host] = a.Unmap()
	}
	return hosts, nil
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// secretRule is CODERUN_AUTH_TOKEN's: visible ASCII only (it travels in an
// Authorization header), at most 4000 bytes (it must fit the header block
// with its name). Its value is never printed (variable.secret).
type secretRule struct{}

func (secretRule) parse(text string) (int64, error) {
	if len(text) > 4000 {
		return 0, errors.New("must be at most 4000 bytes (it must fit one header line)")
	}
	for i := 0; i < len(text); i++ {
		if text[i] < 0x21 || text[i] > 0x7e {
			return 0, errors.New("must be visible ASCII characters only (no spaces)")
		}
	}
	return 0, nil
}

func (secretRule) summary() string { return "bearer token (visible ASCII; never printed)" }
