package typed

import (
	"fmt"
	"strings"
	"testing"
)

const path = "bindings[0].functions[1]"

func mustCompile(t testing.TB, entry string) *Function {
	t.Helper()
	f, err := NewCache(16, 1<<20).Compile(path, []byte(entry))
	if err != nil {
		t.Fatalf("Compile(%s): %v", entry, err)
	}
	return f
}

func TestDeclarationErrorsNameThePath(t *testing.T) {
	deep := func(n int) string { return strings.Repeat(`{"items":`, n) + `{}` + strings.Repeat(`}`, n) }
	huge := strings.Repeat("x", 3<<20)
	cases := []struct{ name, entry, want string }{
		{"params not an object schema", `{"name":"f","parameters":{"type":"string"}}`,
			path + `.parameters: must be an object schema ("type": "object")`},
		{"params without type", `{"name":"f","parameters":{"properties":{}}}`,
			path + `.parameters: must be an object schema`},
		{"params a boolean schema", `{"name":"f","parameters":true}`, path + `.parameters: must be an object schema`},
		{"remote ref", `{"name":"f","parameters":{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}}`,
			path + `.parameters: /properties/a/$ref: "https://example.com/s.json" is not a reference inside this schema`},
		{"file ref", `{"name":"f","returns":{"$ref":"file:///etc/passwd"}}`,
			path + `.returns: /$ref: "file:///etc/passwd" is not a reference inside this schema`},
		{"relative ref", `{"name":"f","returns":{"$ref":"other.json#/a"}}`, path + `.returns: /$ref: "other.json#/a" is not a reference`},
		{"dangling ref", `{"name":"f","returns":{"$ref":"#/$defs/nope"}}`, path + `.returns: /$ref: "#/$defs/nope" points at nothing`},
		{"ref cycle", `{"name":"f","returns":{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}}`,
			path + `.returns: $ref cycle`},
		{"self ref at root", `{"name":"f","returns":{"$ref":"#"}}`, path + `.returns: $ref cycle`},
		{"$id", `{"name":"f","returns":{"$id":"https://example.com/x"}}`, path + `.returns: /$id: $id is not supported`},
		{"$dynamicRef", `{"name":"f","returns":{"$dynamicRef":"#x"}}`, path + `.returns: /$dynamicRef: $dynamicRef is not supported`},
		{"nested $schema", `{"name":"f","returns":{"items":{"$schema":"http://json-schema.org/draft-07/schema#"}}}`,
			path + `.returns: /items/$schema: $schema is allowed only at the top`},
		{"unknown draft", `{"name":"f","returns":{"$schema":"https://example.com/meta"}}`,
			path + `.returns: $schema "https://example.com/meta": only JSON Schema 2020-12 and draft-07 are supported`},
		{"does not compile", `{"name":"f","parameters":{"type":"object","properties":{"a":{"type":5}}}}`,
			path + `.parameters: not a valid schema: /properties/a/type:`},
		{"bad minimum", `{"name":"f","returns":{"minimum":"1"}}`, path + `.returns: not a valid schema: /minimum: expected number, but got string`},
		{"invalid pattern", `{"name":"f","returns":{"type":"string","pattern":"(?<=a)b"}}`,
			path + `.returns: not a valid schema: /pattern: '(?<=a)b' is not valid regex`},
		{"100000 deep", `{"name":"f","returns":` + deep(100000) + `}`, path + `: not valid JSON`},
		{"5000 deep", `{"name":"f","returns":` + deep(5000) + `}`,
			path + `.returns: nested deeper than 64 levels`},
		{"deep but small", `{"name":"f","returns":` + strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70) + `}`,
			path + `.returns: nested deeper than 64 levels`},
		{"huge description", `{"name":"f","description":"` + huge + `"}`, path + `.description: is 3145728 bytes; the most allowed is 16384`},
		{"huge property description", `{"name":"f","parameters":{"type":"object","properties":{"a":{"description":"` + huge + `"}}}}`,
			path + `.parameters: is 3145783 bytes; the most allowed is 262144`},
		{"long number", `{"name":"f","returns":{"maximum":1` + strings.Repeat("0", 100) + `}}`, path + `.returns: number literal longer than 64`},
		{"huge exponent", `{"name":"f","parameters":{"type":"object","properties":{"n":{"minimum":1E1000001}}}}`,
			path + `.parameters: number literal 1E1000001 has an exponent beyond ±4300`},
		{"tiny exponent", `{"name":"f","returns":{"multipleOf":1e-4301}}`, path + `.returns: number literal 1e-4301 has an exponent beyond ±4300`},
		{"unknown member", `{"name":"f","params":{}}`, path + `: must be a name or {name, description?, parameters?, returns?}: unknown field "params"`},
		{"no name", `{"description":"x"}`, path + `.name: is required`},
		{"not JSON", `{"name":`, path + `: not valid JSON`},
		{"a number", `5`, path + `: must be a name or {name`},
		{"duplicate member", `{"name":"f","returns":{"type":"string","type":"integer"}}`, path + `.returns: duplicate member "type"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewCache(16, 1<<20).Compile(path, []byte(c.entry))
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error = %v\nwant prefix %s", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), schemaURL) {
				t.Errorf("error is not one line about the schema: %q", err)
			}
		})
	}
}

func TestDeclarationsAccepted(t *testing.T) {
	cases := []struct{ name, entry string }{
		{"draft-07", `{"name":"f","parameters":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"n":{"type":"integer"}},"properties":{"a":{"$ref":"#/definitions/n"}}}}`},
		{"2020-12 named", `{"name":"f","parameters":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}}`},
		{"recursive through properties", `{"name":"f","returns":{"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}}`},
		{"no schemas", `{"name":"f"}`},
		{"null schemas", `{"name":"f","parameters":null,"returns":null}`},
		{"default is not a $ref", `{"name":"f","returns":{"default":{"$ref":"https://example.com"},"const":{"$id":"x"}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { mustCompile(t, c.entry) })
	}
}

func TestStringEntryIsUntyped(t *testing.T) {
	f := mustCompile(t, ` "lookup" `)
	if f.Name != "lookup" || f.Typed || f.Params != nil || f.Doc != "" {
		t.Fatalf("got %+v", f)
	}
	if f.CheckArgs([]byte(`"anything"`)) != nil || f.CheckResult([]byte(`[1]`)) != nil {
		t.Fatal("an untyped function checks nothing")
	}
}

func TestDocHasDescriptionThenArgs(t *testing.T) {
	f := mustCompile(t, `{"name":"f","description":"Find things.","parameters":{"type":"object",
		"properties":{"b":{"description":"second\nline"},"a":{"description":"first"},"c":{}},"required":["a"]}}`)
	want := "Find things.\n\nArgs:\n    a: first\n    b: second\n        line"
	if f.Doc != want {
		t.Fatalf("Doc = %q\nwant  %q", f.Doc, want)
	}
}

func TestFormatIsAnnotationUnder2020(t *testing.T) {
	f := mustCompile(t, `{"name":"f","returns":{"type":"string","format":"email"}}`)
	if err := f.CheckResult([]byte(`"not an email"`)); err != nil {
		t.Fatalf("2020-12 format asserted: %v", err)
	}
	f = mustCompile(t, `{"name":"f","returns":{"$schema":"http://json-schema.org/draft-07/schema#","type":"string","format":"email"}}`)
	if err := f.CheckResult([]byte(`"not an email"`)); err == nil {
		t.Fatal("draft-07 format not asserted")
	}
}

func TestExponentialUnionsAreRefused(t *testing.T) {
	chain := func(n int) string { // d0 → two refs to d1 → … → dn: 2^(n+1) paths
		var defs []string
		for i := range n {
			defs = append(defs, fmt.Sprintf(`"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
		}
		return fmt.Sprintf(`{"name":"f","returns":{"$defs":{%s,"d%d":{"type":"string"}},"$ref":"#/$defs/d0"}}`, strings.Join(defs, ","), n)
	}
	_, err := NewCache(4, 1<<20).Compile(path, []byte(chain(20)))
	if err == nil || !strings.HasPrefix(err.Error(), path+".returns: too complex: more than 4096 subschemas") {
		t.Fatalf("err = %v", err)
	}
	f := mustCompile(t, chain(10))
	if err := f.CheckResult([]byte(`1`)); err == nil {
		t.Fatal("a number passed a union of strings")
	}
}
