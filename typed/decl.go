package typed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Function is one compiled declaration: immutable, shared by every run that
// declares the same bytes, safe for concurrent use.
type Function struct {
	Name        string
	Description string
	// Typed is false for a string entry: no schema, no checks, the old calling rules.
	Typed bool
	// Params is the calling shape from parameters (nil when none is declared).
	Params []Param
	// Doc is the docstring: the description, then an "Args:" block with the
	// description of each parameter that has one, in stub order.
	Doc string

	params, returns *schema // nil when not declared
	methods         methodMemo
}

// Param is one parameter of a typed function's Python signature, in stub
// order: required properties first, then optional ones, each group in the
// schema's member order. The session sends these to the child.
type Param struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
	// Default is the JSON text of the schema's default (absent when none, and
	// for a required parameter). It is for the signature only: args carry
	// exactly what the program passed (docs/protocol-typed.md §10.3). The stub shows "..."
	// instead when the default does not fit the parameter's Python type.
	Default json.RawMessage `json:"default,omitempty"`
	// KeywordOnly is true for a name that is not a Python identifier (or is a
	// keyword): it can only be passed as **{"max-results": 5}.
	KeywordOnly bool `json:"keywordOnly,omitempty"`
}

// schema is one compiled schema with the ordered tree the stubs read.
type schema struct {
	compiled *jsonschema.Schema
	fast     *fastCheck // nil when the schema has none
	tree     any
}

// entry is a functions entry in its object form (docs/protocol-typed.md §10.1).
type entry struct {
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Returns     json.RawMessage `json:"returns"`
}

// compileEntry builds a Function from one functions entry; errors name the
// member under path.
func compileEntry(path string, raw []byte) (*Function, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, fmt.Errorf("%s: %v", path, syntaxError(err))
		}
		return &Function{Name: name}, nil
	}
	e, err := decodeEntry(path, raw)
	if err != nil {
		return nil, err
	}
	f := &Function{Name: e.Name, Typed: true}
	if e.Description != nil {
		f.Description = *e.Description
	}
	if f.params, err = compileSchema(path+".parameters", e.Parameters, true); err != nil {
		return nil, err
	}
	if f.returns, err = compileSchema(path+".returns", e.Returns, false); err != nil {
		return nil, err
	}
	if f.params != nil {
		f.Params = paramsOf(f.params.tree)
	}
	f.Doc = docOf(f)
	return f, nil
}

// extraKeywords is the parameters schema's additionalProperties when it is
// declared and not false (true or a schema): keywords the signature does not
// name are then passed to the host. ok is false otherwise.
func (f *Function) extraKeywords() (extra any, ok bool) {
	if f.params == nil {
		return nil, false
	}
	o, isObject := f.params.tree.(*object)
	if !isObject {
		return nil, false
	}
	extra, ok = o.get("additionalProperties")
	return extra, ok && extra != false
}

func decodeEntry(path string, raw []byte) (*entry, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var e entry
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("%s: must be a name or {name, description?, parameters?, returns?}: %s",
			path, strings.TrimPrefix(err.Error(), "json: "))
	}
	if e.Name == "" {
		return nil, fmt.Errorf("%s.name: is required", path)
	}
	if e.Description != nil && len(*e.Description) > MaxDescriptionBytes {
		return nil, fmt.Errorf("%s.description: is %d bytes; the most allowed is %d",
			path, len(*e.Description), MaxDescriptionBytes)
	}
	return &e, nil
}

// compileSchema checks and compiles one schema member; absent (or null) →
// nil. The parameters schema must be an object schema.
func compileSchema(path string, raw json.RawMessage, isParams bool) (*schema, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if len(raw) > MaxSchemaBytes {
		return nil, fmt.Errorf("%s: is %d bytes; the most allowed is %d", path, len(raw), MaxSchemaBytes)
	}
	tree, plain, err := decodeTree(raw)
	if err == nil {
		err = checkShape(tree, isParams)
	}
	if err == nil {
		err = checkRefs(tree)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	compiled, err := compilePlain(plain)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &schema{compiled: compiled, fast: newFastCheck(tree), tree: tree}, nil
}

// The drafts a declaration may name; anything else is refused rather than
// fetched.
var drafts = map[string]*jsonschema.Draft{
	"https://json-schema.org/draft/2020-12/schema":  jsonschema.Draft2020,
	"https://json-schema.org/draft/2020-12/schema#": jsonschema.Draft2020,
	"http://json-schema.org/draft-07/schema":        jsonschema.Draft7,
	"http://json-schema.org/draft-07/schema#":       jsonschema.Draft7,
}

func checkShape(tree any, isParams bool) error {
	o, ok := tree.(*object)
	if !ok {
		if isParams {
			return errors.New(`must be an object schema ("type": "object")`)
		}
		return nil // true/false are schemas too
	}
	if s, ok := o.get("$schema"); ok {
		if name, _ := s.(string); drafts[name] == nil {
			return fmt.Errorf("$schema %v: only JSON Schema 2020-12 and draft-07 are supported", jsonText(s))
		}
	}
	if t, _ := o.get("type"); isParams && t != "object" {
		return errors.New(`must be an object schema ("type": "object")`)
	}
	return nil
}

// schemaURL is the synthetic address each schema is registered under; the
// loader refuses every other address, so nothing is ever fetched or read.
const schemaURL = "urn:coderun:schema"

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is outside the declaration; only references inside the schema are allowed", url)
}

func compilePlain(plain any) (s *jsonschema.Schema, err error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	err = guarded(func() error {
		if err := c.AddResource(schemaURL, plain); err != nil {
			return err
		}
		s, err = c.Compile(schemaURL)
		if err != nil {
			return describeCompileError(err)
		}
		return nil
	})
	return s, err
}

// guarded runs a call into the schema library, turning a panic into an
// error. Schemas and values come from hostile sources (programs, upstream
// servers); the library has panicked on numbers it could not parse, which
// decoding now refuses, and a panic it may still have must fail one
// declaration or one check, never leave a call unanswered.
func guarded(call func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the JSON Schema library failed: %v", p)
		}
	}()
	return call()
}

// describeCompileError rewords the library's compile errors, which name the
// synthetic URL, as locations inside the schema. (An invalid pattern is a
// metaschema failure too: the metaschema asserts format "regex".)
func describeCompileError(err error) error {
	var sv *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sv) && errors.As(sv.Err, &ve) {
		return errors.New("not a valid schema: " + strings.Join(listFailures(ve, 3), "; "))
	}
	return errors.New(strings.ReplaceAll(err.Error(), schemaURL, "the schema"))
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func docOf(f *Function) string {
	var args []string
	if f.params != nil {
		props := objectMember(f.params.tree.(*object), "properties")
		for _, p := range f.Params {
			sub, _ := props.vals[p.Name].(*object)
			if sub == nil {
				continue
			}
			if d, ok := sub.vals["description"].(string); ok && d != "" {
				args = append(args, "    "+p.Name+": "+strings.ReplaceAll(d, "\n", "\n        "))
			}
		}
	}
	doc := f.Description
	if len(args) > 0 {
		doc = strings.TrimLeft(doc+"\n\nArgs:\n", "\n") + strings.Join(args, "\n")
	}
	return doc
}
