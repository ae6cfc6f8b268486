package typed

import (
	"slices"
	"strings"
)

// maxTypeDepth bounds how deep a rendered type nests; deeper is Any.
const maxTypeDepth = 16

// typer renders schemas of one module as Python type expressions, collecting
// the TypedDict classes they need. An object node is rendered once: every
// $ref to it (and a recursive one) reuses its class name.
type typer struct {
	names   *namer
	classes []string           // TypedDict definitions, dependencies first
	named   map[*object]string // object node → its TypedDict name
	inRef   map[*object]bool   // $ref targets being rendered, to cut recursion
	refs    map[*object]string // $ref targets rendered: each once, however many refer to it
	uses    map[string]bool    // typing names used
}

func newTyper(names *namer) *typer {
	return &typer{names: names, named: map[*object]string{}, inRef: map[*object]bool{},
		refs: map[*object]string{}, uses: map[string]bool{}}
}

// scope is where a schema sits: its document (for $ref), the function and
// role the document belongs to ("SearchArgs", "SearchResult"), and the name
// an untitled object there gets.
type scope struct {
	root       any
	role, name string
	depth      int
}

func newScope(root any, role string) scope { return scope{root: root, role: role, name: role} }

func (s scope) at(suffix string) scope {
	return scope{root: s.root, role: s.role, name: s.name + camel(suffix), depth: s.depth + 1}
}

func (t *typer) any() string {
	t.uses["Any"] = true
	return "Any"
}

// pyType is the Python type of schema v.
func (t *typer) pyType(v any, sc scope) string {
	o, ok := v.(*object)
	if !ok || sc.depth > maxTypeDepth {
		return t.any()
	}
	if ref, ok := o.vals["$ref"].(string); ok {
		return t.refType(ref, sc)
	}
	if lit := t.literal(o); lit != "" {
		return lit
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if list, ok := o.vals[k].([]any); ok {
			return t.union(list, sc)
		}
	}
	switch ty := o.vals["type"].(type) {
	case string:
		return t.typeNamed(ty, o, sc)
	case []any:
		var parts []string
		for _, e := range ty {
			name, _ := e.(string)
			parts = append(parts, t.typeNamed(name, o, sc))
		}
		return t.join(parts)
	}
	return t.any()
}

func (t *typer) refType(ref string, sc scope) string {
	target, err := resolvePointer(sc.root, strings.TrimPrefix(ref, "#"))
	o, ok := target.(*object)
	switch {
	case err != nil || !ok:
		return t.any()
	case t.inRef[o]:
		if name, ok := t.named[o]; ok {
			return name // a recursive TypedDict refers to itself by name
		}
		return t.any()
	}
	if typ, ok := t.refs[o]; ok {
		return typ
	}
	t.inRef[o] = true
	defer delete(t.inRef, o)
	def := ref[strings.LastIndexByte(ref, '/')+1:] // "#/$defs/hit" in Search's result → SearchResultHit
	typ := t.pyType(o, scope{root: sc.root, role: sc.role, name: sc.role + camel(def), depth: sc.depth + 1})
	t.refs[o] = typ
	return typ
}

// literal is Literal[...] for an enum of strings or a string const, else "".
func (t *typer) literal(o *object) string {
	values, ok := o.vals["enum"].([]any)
	if c, isConst := o.vals["const"]; isConst {
		values, ok = []any{c}, true
	}
	if !ok || len(values) == 0 {
		return ""
	}
	quoted := make([]string, len(values))
	for i, v := range values {
		s, isString := v.(string)
		if !isString {
			return ""
		}
		quoted[i] = pyString(s)
	}
	t.uses["Literal"] = true
	return "Literal[" + strings.Join(quoted, ", ") + "]"
}

func (t *typer) union(list []any, sc scope) string {
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = t.pyType(s, sc.at("Option"))
	}
	return t.join(parts)
}

// join unions distinct parts; Any absorbs everything.
func (t *typer) join(parts []string) string {
	var out []string
	for _, p := range parts {
		if p == "Any" {
			return t.any()
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return t.any()
	}
	return strings.Join(out, " | ")
}

func (t *typer) typeNamed(name string, o *object, sc scope) string {
	switch name {
	case "string":
		return "str"
	case "integer":
		return "int"
	case "number":
		return "float"
	case "boolean":
		return "bool"
	case "null":
		return "None"
	case "array":
		if items, ok := o.vals["items"].(*object); ok {
			return "list[" + t.pyType(items, sc.at("Item")) + "]"
		}
		return "list[" + t.any() + "]"
	case "object":
		return t.objectType(o, sc)
	}
	return t.any()
}

func (t *typer) objectType(o *object, sc scope) string {
	if props, ok := o.vals["properties"].(*object); ok && len(props.keys) > 0 {
		return t.typedDict(o, props, sc)
	}
	if extra, ok := o.vals["additionalProperties"].(*object); ok {
		return "dict[str, " + t.pyType(extra, sc.at("Value")) + "]"
	}
	return "dict[str, " + t.any() + "]"
}
