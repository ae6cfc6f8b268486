// Package wheelset installs the packages a run asks for (docs/packages.md):
// requests validated against the operator's allow-list, resolved and
// installed by uv outside the sandbox, binary wheels only, into a
// content-addressed cache of read-only sets that runs see on sys.path.
//
// It imports the standard library only: rpc validates requests with it,
// config parses the allow-list, session leases sets.
package wheelset

import (
	"errors"
	"strings"
)

// Bounds on what a client may ask for (hostile input, docs/packages.md §2).
const (
	// MaxRequirements bounds the packages of one run or session.
	MaxRequirements = 64
	// MaxRequirementBytes bounds one requirement's text.
	MaxRequirementBytes = 200
)

// Requirement is one validated request: a package name in its PEP 503
// normal form and an optional version specifier (PEP 440 clauses, spaces
// removed). Requirement{Name: "numpy", Spec: ">=1.26,<2"}.
type Requirement struct {
	Name string
	Spec string
}

// String is the requirement as uv reads it.
func (r Requirement) String() string { return r.Name + r.Spec }

// RequirementRule is the rule a refused requirement breaks, as a −32602
// message states it.
const RequirementRule = "must be a package name with an optional version specifier (PEP 508, without URL, extras or markers)"

var errRequirement = errors.New(RequirementRule)

// ParseRequirement validates one requested package: a name of ASCII letters,
// digits, '.', '_' and '-' (starting and ending with a letter or digit),
// then optionally comma-separated clauses of a comparison operator and a
// version, separated by spaces only. Anything else — a URL ("name @ …"), extras ("name[x]"), markers
// ("; python_version…"), a path — is refused.
func ParseRequirement(text string) (Requirement, error) {
	if len(text) == 0 || len(text) > MaxRequirementBytes {
		return Requirement{}, errRequirement
	}
	end := 0
	for end < len(text) && isNameByte(text[end]) {
		end++
	}
	name := text[:end]
	if !validName(name) {
		return Requirement{}, errRequirement
	}
	spec, ok := parseSpec(text[end:])
	if !ok {
		return Requirement{}, errRequirement
	}
	return Requirement{Name: Normalize(name), Spec: spec}, nil
}

func isNameByte(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '-'
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validName: PEP 508's name, [A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?.
func validName(name string) bool {
	return name != "" && isAlnum(name[0]) && isAlnum(name[len(name)-1])
}

// Normalize is a name's PEP 503 normal form: lower case, every run of
// '-', '_' and '.' one '-'.
func Normalize(name string) string {
	var b strings.Builder
	sep := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '-' || c == '_' || c == '.' {
			sep = true
			continue
		}
		if sep {
			b.WriteByte('-')
			sep = false
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// operators are PEP 440's comparison operators, longest first.
var operators = []string{"===", "~=", "==", "!=", "<=", ">=", "<", ">"}

// parseSpec validates a version specifier (possibly empty) and returns it
// without spaces.
func parseSpec(s string) (string, bool) {
	s = strings.Trim(s, " ")
	if s == "" {
		return "", true
	}
	clauses := strings.Split(s, ",")
	for i, c := range clauses {
		c = strings.Trim(c, " ")
		op := ""
		for _, o := range operators {
			if strings.HasPrefix(c, o) {
				op = o
				break
			}
		}
		v := strings.Trim(strings.TrimPrefix(c, op), " ")
		if op == "" || !validVersion(v) {
			return "", false
		}
		clauses[i] = op + v
	}
	return strings.Join(clauses, ","), true
}

// validVersion admits the characters of PEP 440 versions (and a trailing
// ".*" wildcard); uv judges the version itself.
func validVersion(v string) bool {
	if v == "" || !isAlnum(v[0]) {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !isAlnum(c) && c != '.' && c != '*' && c != '+' && c != '!' && c != '-' && c != '_' {
			return false
		}
	}
	return true
}
