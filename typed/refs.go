package typed

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Keywords whose value is one schema, an array of schemas, or a map of
// schemas (2020-12 and draft-07). Every other member is data to the walk.
var (
	schemaKeywords = setOf("additionalProperties", "propertyNames", "items", "additionalItems",
		"contains", "not", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
	schemaListKeywords = setOf("allOf", "anyOf", "oneOf", "prefixItems", "items")
	schemaMapKeywords  = setOf("properties", "patternProperties", "$defs", "definitions",
		"dependentSchemas", "dependencies")
	// inPlace keywords apply their subschemas to the same instance: a cycle
	// through them (with $ref) would never consume input.
	inPlaceKeywords = setOf("allOf", "anyOf", "oneOf", "not", "if", "then", "else",
		"dependentSchemas", "dependencies")
	// refused keywords change how references resolve; a declaration is one
	// self-contained document, so it needs none of them.
	refusedKeywords = setOf("$id", "id", "$dynamicRef", "$dynamicAnchor", "$recursiveRef",
		"$recursiveAnchor", "$vocabulary")
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// refGraph is the walk's result: every schema object with its in-place
// successors, for the cycle check.
type refGraph struct {
	root  any
	edges map[*object][]*object
}

// checkRefs walks every subschema of root: refuses keywords that need
// another document, $ref values that are not a pointer into this schema, a
// $ref that points at nothing, and a cycle of $ref through in-place
// applicators (which no instance could ever terminate).
func checkRefs(root any) error {
	g := &refGraph{root: root, edges: map[*object][]*object{}}
	if err := g.walk(root, "", true); err != nil {
		return err
	}
	return g.bounded()
}

func (g *refGraph) walk(v any, at string, isRoot bool) error {
	o, ok := v.(*object)
	if !ok {
		return nil // a boolean schema or data the metaschema check refuses
	}
	g.edges[o] = nil
	for _, k := range o.keys {
		if err := g.member(o, k, at, isRoot); err != nil {
			return err
		}
	}
	return nil
}

func (g *refGraph) member(o *object, k, at string, isRoot bool) error {
	val, where := o.vals[k], at+"/"+escapePointer(k)
	switch {
	case refusedKeywords[k]:
		return fmt.Errorf("%s: %s is not supported; a schema must be self-contained", where, k)
	case k == "$schema" && !isRoot:
		return fmt.Errorf("%s: $schema is allowed only at the top of the schema", where)
	case k == "$ref":
		return g.ref(o, val, where)
	}
	var subs []any
	switch {
	case schemaListKeywords[k] && isArray(val):
		subs = val.([]any)
	case schemaKeywords[k]:
		subs = []any{val}
	case schemaMapKeywords[k]:
		if m, ok := val.(*object); ok {
			for _, name := range m.keys {
				if err := g.walk(m.vals[name], where+"/"+escapePointer(name), false); err != nil {
					return err
				}
				g.inPlace(o, k, m.vals[name])
			}
		}
		return nil
	}
	for i, s := range subs {
		if err := g.walk(s, where+indexSuffix(val, i), false); err != nil {
			return err
		}
		g.inPlace(o, k, s)
	}
	return nil
}

func (g *refGraph) inPlace(parent *object, k string, child any) {
	if c, ok := child.(*object); ok && inPlaceKeywords[k] {
		g.edges[parent] = append(g.edges[parent], c)
	}
}

func (g *refGraph) ref(o *object, val any, where string) error {
	ref, ok := val.(string)
	if !ok {
		return fmt.Errorf("%s: must be a string", where)
	}
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return fmt.Errorf("%s: %q is not a reference inside this schema (only \"#/$defs/...\" pointers are allowed)", where, ref)
	}
	target, err := resolvePointer(g.root, ref[1:])
	if err != nil {
		return fmt.Errorf("%s: %q %v", where, ref, err)
	}
	if t, ok := target.(*object); ok {
		g.edges[o] = append(g.edges[o], t)
	}
	return nil
}

// maxInPlace bounds how many subschemas may apply to one value through
// in-place keywords ($ref, allOf, anyOf, oneOf, not, if/then/else, …), so a
// chain of unions that refer to unions cannot make a check exponential.
const maxInPlace = 4096

// bounded refuses a cycle among in-place edges and a schema whose in-place
// expansion from any node exceeds maxInPlace, by depth-first search that
// counts paths (memoized, saturating).
func (g *refGraph) bounded() error {
	const open = -1
	paths := map[*object]int{}
	var count func(o *object) (int, error)
	count = func(o *object) (int, error) {
		switch n := paths[o]; {
		case n == open:
			return 0, errors.New("$ref cycle: a schema refers back to itself without descending into the value")
		case n > 0:
			return n, nil
		}
		paths[o] = open
		total := 1
		for _, next := range g.edges[o] {
			n, err := count(next)
			if err != nil {
				return 0, err
			}
			total = min(total+n, maxInPlace+1)
		}
		paths[o] = total
		return total, nil
	}
	for o := range g.edges {
		n, err := count(o)
		if err != nil {
			return err
		}
		if n > maxInPlace {
			return fmt.Errorf("too complex: more than %d subschemas would apply to one value through $ref, allOf, anyOf and oneOf", maxInPlace)
		}
	}
	return nil
}

// resolvePointer follows a URI-fragment JSON Pointer ("/$defs/a") in root.
func resolvePointer(root any, frag string) (any, error) {
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, fmt.Errorf("is not a valid URI fragment")
	}
	cur := root
	if frag == "" {
		return cur, nil
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		next, ok := step(cur, tok)
		if !ok {
			return nil, fmt.Errorf("points at nothing in this schema")
		}
		cur = next
	}
	return cur, nil
}

func step(cur any, tok string) (any, bool) {
	switch c := cur.(type) {
	case *object:
		return c.get(tok)
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(c) {
			return nil, false
		}
		return c[i], true
	}
	return nil, false
}

func isArray(v any) bool {
	_, ok := v.([]any)
	return ok
}

func indexSuffix(val any, i int) string {
	if isArray(val) {
		return "/" + strconv.Itoa(i)
	}
	return ""
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
