package typed

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// MaxListed is how many failing locations an error lists before "and N more".
const MaxListed = 10

// CheckArgs validates a call's args (lossless JSON text) against the
// declared parameters. nil when the function has no parameters schema. A key
// repeated within an object is refused: the check would read the last one,
// and the receiver of the forwarded text may read the first.
func (f *Function) CheckArgs(args []byte) error { return f.params.check(args, true) }

// CheckResult validates a host's result (lossless JSON text) against the
// declared returns. nil when the function has no returns schema.
// A repeated key keeps its last value, as the program's parser does.
func (f *Function) CheckResult(value []byte) error { return f.returns.check(value, false) }

// check decodes numbers as json.Number, so integers beyond 2^53 and
// decimals are compared exactly (the library compares numbers as big.Rat).
// A value the fast check accepts is not shown to the library; nor is one
// whose check would take more than MaxCheckSteps (ErrTooCostly).
func (s *schema) check(value []byte, uniqueKeys bool) error {
	if s == nil {
		return nil
	}
	v, err := decodeInstance(value, uniqueKeys)
	if err != nil {
		return fmt.Errorf("(root): %v", err)
	}
	if s.fast != nil && s.fast.accepts(v) {
		return nil
	}
	if !withinBudget(s.compiled, v, MaxCheckSteps) {
		return tooCostly()
	}
	err = guarded(func() error { return s.compiled.Validate(v) })
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	return errors.New(strings.Join(listFailures(ve, MaxListed), "\n"))
}

// listFailures flattens a validation error to its leaves, one line each
// ("<pointer>: <rule broken>"), sorted and deduplicated for a stable order,
// at most max lines plus an "and N more" line. Type failures at one location
// (from anyOf/oneOf branches) merge into one line: "expected string or null".
func listFailures(ve *jsonschema.ValidationError, max int) []string {
	f := failures{types: map[string]*typeFailure{}}
	f.collect(ve)
	lines := f.lines
	for at, tf := range f.types {
		lines = append(lines, at+": expected "+strings.Join(tf.want, " or ")+", but got "+tf.got)
	}
	sort.Strings(lines)
	lines = compactLines(lines)
	if len(lines) > max {
		more := len(lines) - max
		lines = append(lines[:max:max], "and "+strconv.Itoa(more)+" more")
	}
	return lines
}

type failures struct {
	lines []string
	types map[string]*typeFailure // by pointer
}

type typeFailure struct {
	want []string
	got  string
}

func (f *failures) collect(ve *jsonschema.ValidationError) {
	for _, c := range ve.Causes {
		f.collect(c)
	}
	if len(ve.Causes) > 0 {
		return
	}
	k, ok := ve.ErrorKind.(*kind.Type)
	if !ok {
		f.lines = append(f.lines, describe(ve)...)
		return
	}
	at := pointer(ve.InstanceLocation)
	tf := f.types[at]
	if tf == nil {
		tf = &typeFailure{got: k.Got}
		f.types[at] = tf
	}
	for _, w := range k.Want {
		if !slices.Contains(tf.want, w) {
			tf.want = append(tf.want, w)
		}
	}
}

func compactLines(lines []string) []string {
	out := lines[:0]
	for i, l := range lines {
		if i == 0 || l != lines[i-1] {
			out = append(out, l)
		}
	}
	return out
}

// describe words one leaf failure. Property-level failures are reported at
// the property's own pointer; numbers are shown exactly.
func describe(ve *jsonschema.ValidationError) []string {
	at := pointer(ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		return perProperty(ve.InstanceLocation, k.Missing, "required property is missing")
	case *kind.AdditionalProperties:
		return perProperty(ve.InstanceLocation, k.Properties, "property is not allowed")
	case *kind.Minimum:
		return []string{at + ": must be >= " + ratText(k.Want) + ", but is " + ratText(k.Got)}
	case *kind.Maximum:
		return []string{at + ": must be <= " + ratText(k.Want) + ", but is " + ratText(k.Got)}
	case *kind.ExclusiveMinimum:
		return []string{at + ": must be > " + ratText(k.Want) + ", but is " + ratText(k.Got)}
	case *kind.ExclusiveMaximum:
		return []string{at + ": must be < " + ratText(k.Want) + ", but is " + ratText(k.Got)}
	case *kind.MultipleOf:
		return []string{at + ": must be a multiple of " + ratText(k.Want) + ", but is " + ratText(k.Got)}
	case *kind.FalseSchema:
		return []string{at + ": no value is allowed here"}
	}
	return []string{at + ": " + libraryWording(ve)}
}

func perProperty(loc []string, names []string, what string) []string {
	lines := make([]string, len(names))
	for i, n := range names {
		lines[i] = pointer(append(loc[:len(loc):len(loc)], n)) + ": " + what
	}
	return lines
}

// libraryWording is the library's own message for the rule, without its
// location prefix (rendered with an empty location and cut).
func libraryWording(ve *jsonschema.ValidationError) string {
	leaf := *ve
	leaf.InstanceLocation = nil
	return strings.TrimPrefix(leaf.Error(), "at '': ")
}

// pointer is the RFC 6901 JSON Pointer of a location; the whole value
// (the empty pointer) reads "(root)".
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return "(root)"
	}
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(escapePointer(t))
	}
	return sb.String()
}

// ratText shows a number exactly: an integer in full, a decimal with as
// many digits as it needs, else a fraction.
func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	for prec := 1; prec <= 40; prec++ {
		s := r.FloatString(prec)
		if back, ok := new(big.Rat).SetString(s); ok && back.Cmp(r) == 0 {
			return s
		}
	}
	return r.RatString()
}
