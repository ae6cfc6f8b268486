package typed

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fastCheck is an accept-only check compiled from a schema that uses only the
// common keywords (type, properties, required, additionalProperties, items,
// enum of strings, booleans and null, anyOf, integer minimum, maximum,
// minLength and maxLength, and annotations). What it accepts the library accepts too, so a value that
// matches costs no library call (the library compares every number through
// fmt.Sprint and big.Rat and allocates per keyword: ~10 µs for a small
// object). Whatever it is unsure of — a mismatch, a number that is not a plain
// integer when that matters, a bound beyond int64 — it leaves to the library,
// which decides and words the errors. A schema with any other keyword, or a
// keyword of an unexpected shape, has none.
type fastCheck struct {
	types    typeSet // allowed instance types
	never    bool    // the false schema
	props    map[string]*fastCheck
	required []string
	closed   bool       // additionalProperties: false
	extra    *fastCheck // the additionalProperties schema; nil: anything
	items    *fastCheck // nil: anything
	enum     []any      // strings, booleans and nil; hasEnum tells an empty list from none
	hasEnum  bool
	anyOf    []*fastCheck
	min, max *int64
	// minLen, maxLen bound a string's length in code points, counted as the
	// library counts them (utf8.RuneCount).
	minLen, maxLen *int64
}

type typeSet uint8

const (
	tNull typeSet = 1 << iota
	tBoolean
	tObject
	tArray
	tNumber
	tInteger // a number whose token is a plain integer
	tString
	tAll = tNull | tBoolean | tObject | tArray | tNumber | tInteger | tString
)

var typeNames = map[string]typeSet{"null": tNull, "boolean": tBoolean, "object": tObject,
	"array": tArray, "number": tNumber | tInteger, "integer": tInteger, "string": tString}

// annotations are keywords that never reject a value; format is one
// under 2020-12 only (the library's default for each draft).
var (
	annotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
		"$comment": true, "$schema": true, "deprecated": true, "readOnly": true, "writeOnly": true}
	annotations2020 = map[string]bool{"format": true}
)

// newFastCheck compiles tree (an ordered schema tree); nil when the schema
// has no fast check.
func newFastCheck(tree any) *fastCheck {
	draft := jsonschema.Draft2020
	if o, ok := tree.(*object); ok {
		if name, ok := o.vals["$schema"].(string); ok {
			draft = drafts[name]
		}
	}
	return fastOf(tree, draft == jsonschema.Draft2020)
}

func fastOf(tree any, is2020 bool) *fastCheck {
	switch s := tree.(type) {
	case bool:
		return &fastCheck{types: tAll, never: !s}
	case *object:
		f := &fastCheck{types: tAll}
		for _, k := range s.keys {
			if !annotations[k] && !(is2020 && annotations2020[k]) && !f.set(k, s.vals[k], is2020) {
				return nil
			}
		}
		return f
	}
	return nil
}

// set compiles one keyword; false when it has no fast form.
func (f *fastCheck) set(keyword string, v any, is2020 bool) bool {
	ok := true
	switch keyword {
	case "type":
		f.types, ok = typesOf(v)
	case "properties":
		f.props, ok = subschemas(v, is2020)
	case "required":
		f.required, ok = stringsOf(v)
	case "additionalProperties":
		if b, isBool := v.(bool); isBool && !b {
			f.closed = true
		} else {
			f.extra = fastOf(v, is2020)
			ok = f.extra != nil
		}
	case "items":
		f.items = fastOf(v, is2020)
		ok = f.items != nil
	case "enum":
		f.enum, ok = v.([]any)
		f.hasEnum = true
		for _, e := range f.enum {
			switch e.(type) {
			case string, bool, nil:
			default:
				ok = false
			}
		}
	case "anyOf":
		list, isList := v.([]any)
		ok = isList && len(list) > 0
		for _, sub := range list {
			g := fastOf(sub, is2020)
			f.anyOf, ok = append(f.anyOf, g), ok && g != nil
		}
	case "minimum":
		f.min, ok = plainInt(v)
	case "maximum":
		f.max, ok = plainInt(v)
	case "minLength":
		f.minLen, ok = plainInt(v)
	case "maxLength":
		f.maxLen, ok = plainInt(v)
	default:
		ok = false
	}
	return ok
}

func typesOf(v any) (typeSet, bool) {
	names, ok := v.([]any)
	if s, isString := v.(string); isString {
		names, ok = []any{s}, true
	}
	var set typeSet
	for _, n := range names {
		s, _ := n.(string)
		t, known := typeNames[s]
		ok = ok && known
		set |= t
	}
	return set, ok
}

func subschemas(v any, is2020 bool) (map[string]*fastCheck, bool) {
	o, ok := v.(*object)
	if !ok {
		return nil, false
	}
	m := make(map[string]*fastCheck, len(o.keys))
	for _, k := range o.keys {
		if m[k] = fastOf(o.vals[k], is2020); m[k] == nil {
			return nil, false
		}
	}
	return m, true
}

func stringsOf(v any) ([]string, bool) {
	list, ok := v.([]any)
	out := make([]string, len(list))
	for i, e := range list {
		out[i], ok = e.(string)
		if !ok {
			return nil, false
		}
	}
	return out, ok
}

// plainInt is a schema number that is a plain integer token fitting int64.
func plainInt(v any) (*int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return &i, err == nil
}

// accepts reports whether v (as decodeInstance decodes it) surely matches;
// false means the library must decide. It gives up (false) after
// MaxFastSteps (sub-check, part of the value) pairs, so a large schema
// applied to a large value costs no more than that.
func (f *fastCheck) accepts(v any) bool {
	steps := MaxFastSteps
	return f.within(v, &steps)
}

// within is accepts with the steps left, spent one per pair.
func (f *fastCheck) within(v any, steps *int) bool {
	if *steps--; *steps < 0 {
		return false
	}
	if f.never || !f.acceptsType(v) {
		return false
	}
	if f.hasEnum && !f.inEnum(v) {
		return false
	}
	if len(f.anyOf) > 0 && !f.anyAccepts(v, steps) {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		return f.acceptsObject(x, steps)
	case []any:
		return f.acceptsArray(x, steps)
	case json.Number:
		return f.inBounds(x)
	case string:
		return f.lengthFits(x, steps)
	}
	return true
}

func (f *fastCheck) acceptsType(v any) bool {
	var t typeSet
	switch x := v.(type) {
	case nil:
		t = tNull
	case bool:
		t = tBoolean
	case string:
		t = tString
	case map[string]any:
		t = tObject
	case []any:
		t = tArray
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return f.types&(tNumber|tInteger) != 0
		}
		t = tNumber // 1.0 is an integer to the library: unsure, so not accepted as one
	}
	return f.types&t != 0
}

func (f *fastCheck) inEnum(v any) bool {
	for _, e := range f.enum {
		if e == v { // enum holds only strings, booleans and nil: comparable, and only equal to the same
			return true
		}
	}
	return false
}

func (f *fastCheck) anyAccepts(v any, steps *int) bool {
	for _, g := range f.anyOf {
		if g.within(v, steps) {
			return true
		}
	}
	return false
}

func (f *fastCheck) acceptsObject(m map[string]any, steps *int) bool {
	for _, k := range f.required {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	for k, v := range m {
		sub, declared := f.props[k]
		switch {
		case declared:
			if !sub.within(v, steps) {
				return false
			}
		case f.closed:
			return false
		case f.extra != nil && !f.extra.within(v, steps):
			return false
		}
	}
	return true
}

func (f *fastCheck) acceptsArray(a []any, steps *int) bool {
	if f.items == nil {
		return true
	}
	for _, v := range a {
		if !f.items.within(v, steps) {
			return false
		}
	}
	return true
}

func (f *fastCheck) inBounds(n json.Number) bool {
	if f.min == nil && f.max == nil {
		return true
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return err == nil && (f.min == nil || i >= *f.min) && (f.max == nil || i <= *f.max)
}

// lengthFits counts s's characters, at a step per 16 bytes: a fast step is
// 64 times cheaper than a budget step, counting a byte is not.
func (f *fastCheck) lengthFits(s string, steps *int) bool {
	if f.minLen == nil && f.maxLen == nil {
		return true
	}
	if *steps -= len(s) / (bytesPerStep * MaxCheckSteps / MaxFastSteps); *steps < 0 {
		return false
	}
	n := int64(utf8.RuneCountInString(s))
	return (f.minLen == nil || n >= *f.minLen) && (f.maxLen == nil || n <= *f.maxLen)
}
