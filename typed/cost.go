package typed

import (
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxCheckSteps bounds the work of one check, counted by withinBudget: a
// step per application of a subschema to a part of the value and per member
// of each object and array so visited, plus fractions for the lists a
// subschema scans and for depth. A value that would take more is refused
// without calling the library (ErrTooCostly). Ordinary schemas apply a few
// subschemas to each part of a value, so this admits an array of some 10 000
// small objects; the costliest values it admits (every branch failing, deep)
// took the library 50-75 ms here. A schema whose alternatives both recurse
// (anyOf: [{items: {$ref: "#"}}, {items: {$ref: "#"}, minItems: 1}]) doubles
// the work at each level of nesting and reaches it at 13 levels.
const MaxCheckSteps = 1 << 16

// MaxFastSteps bounds the accept-only fast check (fast.go) the same way: it
// costs tens of nanoseconds a pair where the library costs microseconds, so
// it may go further; past it, the value is left to the budget and the library.
const MaxFastSteps = 64 * MaxCheckSteps

// ErrTooCostly is the error (wrapped) of a check refused by MaxCheckSteps.
var ErrTooCostly = errors.New("too costly to check")

// withinBudget reports whether checking v against s costs at most steps
// steps. It walks the pairs the library's validator can visit — every
// applicator followed, whatever the outcome of the branches, so an upper
// bound — charging each pair its schema's lists (weight), a 32nd of a step
// per level of its depth in the value (the library copies a failure's
// location, one token per level) and a step per bytesPerStep of a string
// (of a key, per pattern), and each object or array its members;
// it stops as soon as the budget is spent, so its own work is bounded by
// steps too. Iterative: values nest deeper than a call stack should.
func withinBudget(s *jsonschema.Schema, v any, steps int) bool {
	type pair struct {
		s     *jsonschema.Schema
		v     any
		depth int
	}
	stack := []pair{{s, v, 0}}
	var subs []*jsonschema.Schema // scratch
	push := func(v any, depth int) {
		for _, s := range subs {
			if s != nil && steps >= 0 {
				steps--
				stack = append(stack, pair{s, v, depth})
			}
		}
	}
	for len(stack) > 0 && steps >= 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		steps -= weight(p.s) + p.depth/32
		subs = inPlace(subs[:0], p.s)
		push(p.v, p.depth)
		switch x := p.v.(type) {
		case string:
			steps -= len(x) / bytesPerStep
		case map[string]any:
			if steps -= len(x); steps < 0 {
				return false
			}
			for k, member := range x {
				steps -= len(k) / bytesPerStep * len(p.s.PatternProperties)
				subs = propertySchemas(subs[:0], p.s, k)
				push(member, p.depth+1)
				subs = append(subs[:0], p.s.PropertyNames)
				push(k, p.depth+1)
			}
		case []any:
			if steps -= len(x); steps < 0 {
				return false
			}
			for i, item := range x {
				subs = itemSchemas(subs[:0], p.s, i)
				push(item, p.depth+1)
			}
		}
	}
	return steps >= 0
}

// bytesPerStep is how many bytes of a string cost a step: a subschema may
// scan the whole string (pattern, format, length, enum), at about a
// nanosecond a byte against the microsecond of a pair.
const bytesPerStep = 1024

// weight is what applying s costs the library whatever the value, beyond
// its subschemas: the lists it scans at each application (required names,
// dependencies, enum values), an entry a sixteenth of a step (a comparison
// costs about that against the evaluation of a pair), so an enum of a few
// hundred values over a few thousand items fits.
func weight(s *jsonschema.Schema) int {
	w := len(s.Required) + len(s.Dependencies) + len(s.DependentRequired)
	for _, d := range s.Dependencies {
		if names, ok := d.([]string); ok {
			w += len(names)
		}
	}
	for _, names := range s.DependentRequired {
		w += len(names)
	}
	if s.Enum != nil {
		w += len(s.Enum.Values)
	}
	return w / 16
}

// inPlace appends to subs the subschemas s applies to the same value.
func inPlace(subs []*jsonschema.Schema, s *jsonschema.Schema) []*jsonschema.Schema {
	subs = append(subs, s.Ref, s.Not, s.If, s.Then, s.Else)
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	for _, d := range s.DependentSchemas {
		subs = append(subs, d)
	}
	for _, d := range s.Dependencies {
		if d, ok := d.(*jsonschema.Schema); ok {
			subs = append(subs, d)
		}
	}
	return subs
}

// propertySchemas appends to subs the subschemas s may apply to member k of
// an object: every pattern is counted as matching.
func propertySchemas(subs []*jsonschema.Schema, s *jsonschema.Schema, k string) []*jsonschema.Schema {
	subs = append(subs, s.Properties[k], s.UnevaluatedProperties)
	if ap, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		subs = append(subs, ap)
	}
	for _, p := range s.PatternProperties {
		subs = append(subs, p)
	}
	return subs
}

// itemSchemas appends to subs the subschemas s may apply to item i of an
// array.
func itemSchemas(subs []*jsonschema.Schema, s *jsonschema.Schema, i int) []*jsonschema.Schema {
	subs = append(subs, s.Items2020, s.Contains, s.UnevaluatedItems)
	if i < len(s.PrefixItems) {
		subs = append(subs, s.PrefixItems[i])
	}
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		subs = append(subs, items)
	case []*jsonschema.Schema:
		if i < len(items) {
			subs = append(subs, items[i])
		} else if ai, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
			subs = append(subs, ai)
		}
	}
	return subs
}

// tooCostly is the error of a check refused by the budget.
func tooCostly() error {
	return fmt.Errorf("(root): %w: checking this value against the declared schema would take more than %d steps (alternatives that recurse into nested values, or a value nested too deep)", ErrTooCostly, MaxCheckSteps)
}
