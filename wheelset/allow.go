package wheelset

import (
	"fmt"
	"slices"
	"strings"
)

// AllowList is the operator's CODERUN_PACKAGES: the names a run may ask
// for, each with an optional version range that every resolution including
// that package must meet (passed to uv as a constraint), or "*" for any
// name. The zero AllowList allows nothing: the feature is off.
type AllowList struct {
	any   bool
	names map[string]bool
	// constraints are the entries with a version range, in the list's order.
	constraints []Requirement
}

// ParseAllowList reads CODERUN_PACKAGES: entries separated by commas, each
// "*" or a requirement (ParseRequirement's rule). A comma-separated part
// that starts with a comparison operator continues the entry before it, so
// "numpy>=1.26,<2,scipy" is numpy within [1.26, 2) and any scipy.
func ParseAllowList(text string) (AllowList, error) {
	var a AllowList
	for _, entry := range joinClauses(strings.Split(text, ",")) {
		entry = strings.TrimSpace(entry)
		switch {
		case entry == "":
			continue
		case entry == "*":
			a.any = true
			continue
		}
		r, err := ParseRequirement(entry)
		if err != nil {
			return AllowList{}, fmt.Errorf("entry %q %s, or be *", entry, RequirementRule)
		}
		if a.names == nil {
			a.names = map[string]bool{}
		}
		a.names[r.Name] = true
		if r.Spec != "" {
			a.constraints = append(a.constraints, r)
		}
	}
	return a, nil
}

// joinClauses puts a part that starts with an operator back onto the part
// before it.
func joinClauses(parts []string) []string {
	var out []string
	for _, p := range parts {
		t := strings.TrimSpace(p)
		if len(out) > 0 && t != "" && slices.ContainsFunc(operators, func(o string) bool { return strings.HasPrefix(t, o) }) {
			out[len(out)-1] += "," + t
			continue
		}
		out = append(out, p)
	}
	return out
}

// Enabled reports whether any package may be asked for.
func (a AllowList) Enabled() bool { return a.any || len(a.names) > 0 }

// Allows reports whether a request for name (normal form) is admitted.
func (a AllowList) Allows(name string) bool { return a.any || a.names[name] }

// Constraints are the allow-list's version ranges, for every resolution.
func (a AllowList) Constraints() []Requirement { return slices.Clone(a.constraints) }

// Describe is the allow-list as the bindings/describe header states it:
// "*" (any name) or the allowed names, sorted, with their ranges.
func (a AllowList) Describe() []string {
	var out []string
	if a.any {
		out = append(out, "*")
	}
	ranged := map[string]bool{}
	for _, c := range a.constraints {
		out = append(out, c.String())
		ranged[c.Name] = true
	}
	for n := range a.names {
		if !ranged[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
