package typed

import (
	"encoding/json"

	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// paramsOf derives the calling shape from a parameters schema: required
// properties first, then optional ones, each in the schema's member order
// (a required name with no properties entry follows in "required" order).
// A required parameter never carries a default: Python forbids a parameter
// without one after a parameter with one, and required means "always given".
func paramsOf(tree any) []Param {
	o, _ := tree.(*object)
	props := objectMember(o, "properties")
	required := requiredSet(o)
	var req, opt []Param
	for _, name := range props.keys {
		p := Param{Name: name, Required: required[name], KeywordOnly: !isIdentifier(name)}
		if p.Required {
			req = append(req, p)
			delete(required, name)
			continue
		}
		if sub, ok := props.vals[name].(*object); ok {
			if d, ok := sub.get("default"); ok {
				p.Default = json.RawMessage(appendJSON(nil, d))
			}
		}
		opt = append(opt, p)
	}
	for _, name := range requiredNames(o) {
		if required[name] {
			req = append(req, Param{Name: name, Required: true, KeywordOnly: !isIdentifier(name)})
			delete(required, name)
		}
	}
	return append(req, opt...)
}

// objectMember is o[key] as an object, or an empty one.
func objectMember(o *object, key string) *object {
	if o != nil {
		if m, ok := o.vals[key].(*object); ok {
			return m
		}
	}
	return &object{vals: map[string]any{}}
}

func requiredNames(o *object) []string {
	var names []string
	if o == nil {
		return nil
	}
	list, _ := o.vals["required"].([]any)
	for _, v := range list {
		if s, ok := v.(string); ok {
			names = append(names, s)
		}
	}
	return names
}

func requiredSet(o *object) map[string]bool {
	set := map[string]bool{}
	for _, n := range requiredNames(o) {
		set[n] = true
	}
	return set
}

// pythonKeywords are the hard keywords; "self" is added because every stub
// method takes self first.
var pythonKeywords = setOf("False", "None", "True", "and", "as", "assert", "async", "await",
	"break", "class", "continue", "def", "del", "elif", "else", "except", "finally", "for",
	"from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass",
	"raise", "return", "try", "while", "with", "yield")

// isIdentifier reports whether name can be a Python parameter name. Only
// ASCII identifiers count: a non-ASCII name is passed by **{...}, which is
// always correct, rather than risk Python's NFKC rules disagreeing with ours.
func isIdentifier(name string) bool {
	if name == "" || pythonKeywords[name] || name == "self" {
		return false
	}
	for i, c := range name {
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// IsMethodName reports whether a function named name is a method in the
// stubs (an identifier, no keyword, not self); any other is shown as a
// comment with its subscript call form.
func IsMethodName(name string) bool { return isIdentifier(name) }

// appendJSON writes an ordered tree as compact JSON, keeping member order.
func appendJSON(dst []byte, v any) []byte {
	switch t := v.(type) {
	case *object:
		dst = append(dst, '{')
		for i, k := range t.keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = wireguard.AppendString(dst, k)
			dst = appendJSON(append(dst, ':'), t.vals[k])
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, e)
		}
		return append(dst, ']')
	case string:
		return wireguard.AppendString(dst, t)
	case json.Number:
		return append(dst, t...)
	case bool:
		if t {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	}
	return append(dst, "null"...)
}
