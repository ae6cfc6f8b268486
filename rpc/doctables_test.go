package rpc

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/wire"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the params tables of docs/protocol*.md from the methods table")

// The protocol docs show a method's params as a table generated from the
// rows the daemon validates with (wire.Params) and the methods table,
// between an opening marker naming the method and a closing one:
//
//	<!-- params run: generated, go test ./rpc -run TestC1110 -update-docs -->
//	| member | type | required | what it is |
//	…
//	<!-- end params -->
var paramsBlock = regexp.MustCompile(`(?s)(<!-- params (\S+): generated[^\n]*-->\n).*?(<!-- end params -->)`)

const docsGlob = "../docs/protocol*.md"

// C1110: every method with params has its table in the protocol docs, and
// each table is what the tables generate: a row added, a summary or a
// schema changed without regenerating the docs fails here.
func TestC1110ProtocolDocsParamsTablesCurrent(t *testing.T) {
	pages, err := filepath.Glob(docsGlob)
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages %s: %v", docsGlob, err)
	}
	shown := map[string]bool{}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		fresh, names, err := renderParamsBlocks(text)
		if err != nil {
			t.Errorf("%s: %v", page, err)
			continue
		}
		for _, n := range names {
			shown[n] = true
		}
		if *updateDocs && !bytes.Equal(fresh, text) {
			if err := os.WriteFile(page, fresh, 0o644); err != nil {
				t.Fatal(err)
			}
			text = fresh
		}
		if !bytes.Equal(fresh, text) {
			t.Errorf("%s: a params table is stale: go test ./rpc -run TestC1110 -update-docs", page)
		}
	}
	for _, m := range methods {
		if len(m.params) > 0 && !shown[m.name] {
			t.Errorf("method %s has params and no table in docs/protocol*.md: add a marker pair (paramsBlock) where it is described and regenerate", m.name)
		}
	}
}

// renderParamsBlocks is text with every params block regenerated, and the
// methods the blocks name. A block naming no method with params is an error.
func renderParamsBlocks(text []byte) ([]byte, []string, error) {
	var names []string
	var bad error
	out := paramsBlock.ReplaceAllFunc(text, func(block []byte) []byte {
		sub := paramsBlock.FindSubmatch(block)
		name := string(sub[2])
		m := methodNamed(name)
		if m == nil || len(m.params) == 0 {
			bad = fmt.Errorf("a params block names %q, which is no method with params", name)
			return block
		}
		names = append(names, name)
		return append(append(append([]byte{}, sub[1]...), paramsTable(m.params)...), sub[3]...)
	})
	return out, names, bad
}

func methodNamed(name string) *method {
	for i := range methods {
		if methods[i].name == name {
			return &methods[i]
		}
	}
	return nil
}

// paramsTable is the markdown table of a method's params, one row per
// member in the order they are validated.
func paramsTable(params []wire.Param) string {
	var b strings.Builder
	b.WriteString("| member | type | required | what it is |\n|---|---|---|---|\n")
	for _, p := range params {
		required := "no"
		if p.Required {
			required = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", p.Name, cell(schemaType(p.Schema)), required, cell(p.Summary))
	}
	return b.String()
}

// cell keeps a table cell one cell: a "|" inside it is escaped.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// schemaType says in words what a member's JSON Schema admits: its types
// (a $ref by the schema's name, an array as "X array"), then the bounds
// the schema states.
func schemaType(schema string) string {
	var v any
	if err := json.Unmarshal([]byte(schema), &v); err != nil {
		return "`" + schema + "`"
	}
	return describeSchema(v)
}

func describeSchema(v any) string {
	s, ok := v.(map[string]any)
	if !ok {
		return "any JSON value"
	}
	var kinds []string
	switch {
	case s["$ref"] != nil:
		ref, _ := s["$ref"].(string)
		kinds = append(kinds, ref[strings.LastIndex(ref, "/")+1:])
	case s["oneOf"] != nil:
		alts, _ := s["oneOf"].([]any)
		for _, a := range alts {
			kinds = append(kinds, describeSchema(a))
		}
	case s["enum"] != nil:
		vals, _ := s["enum"].([]any)
		for _, e := range vals {
			raw, _ := json.Marshal(e)
			kinds = append(kinds, "`"+string(raw)+"`")
		}
	default:
		kinds = schemaKinds(s)
	}
	return strings.Join(append([]string{strings.Join(kinds, " or ")}, schemaBounds(s)...), ", ")
}

// schemaKinds is a schema's "type" (one or a list), an array with its items.
func schemaKinds(s map[string]any) []string {
	var types []string
	switch t := s["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			if n, ok := e.(string); ok {
				types = append(types, n)
			}
		}
	}
	for i, t := range types {
		if t == "array" && s["items"] != nil {
			types[i] = "array of " + describeSchema(s["items"])
		}
	}
	if len(types) == 0 {
		return []string{"any JSON value"}
	}
	return types
}

// schemaBounds are the bounds a schema states, in words.
func schemaBounds(s map[string]any) []string {
	var out []string
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n, _ := s[k].(float64)
		switch k {
		case "minLength":
			if n == 1 {
				out = append(out, "non-empty")
			} else {
				out = append(out, fmt.Sprintf("at least %g characters", n))
			}
		case "maxItems":
			out = append(out, fmt.Sprintf("at most %g entries", n))
		case "minimum":
			out = append(out, fmt.Sprintf("at least %g", n))
		case "pattern":
			out = append(out, fmt.Sprintf("matching `%s`", s[k]))
		case "properties":
			props, _ := s[k].(map[string]any)
			names := make([]string, 0, len(props))
			for p := range props {
				names = append(names, "`"+p+"`")
			}
			sort.Strings(names)
			out = append(out, "with "+strings.Join(names, ", "))
		}
	}
	return out
}

// C1111: the generator rewrites a block whose rows differ from the tables
// (an edited summary, a missing row), leaves the text around it alone,
// refuses a block naming no method with params, and keeps a "|" inside a
// cell from splitting it.
func TestC1111ParamsBlocksRegenerate(t *testing.T) {
	open := "<!-- params session/close: generated, go test ./rpc -run TestC1110 -update-docs -->\n"
	stale := "before\n" + open + "| member | type | required | what it is |\n|---|---|---|---|\n| `sessionId` | string | yes | edited by hand |\n<!-- end params -->\nafter\n"
	fresh, names, err := renderParamsBlocks([]byte(stale))
	if err != nil || len(names) != 1 || names[0] != "session/close" {
		t.Fatalf("names %v, err %v", names, err)
	}
	want := "before\n" + open + paramsTable(methodNamed("session/close").params) + "<!-- end params -->\nafter\n"
	if string(fresh) != want {
		t.Errorf("regenerated:\n%s\nwant:\n%s", fresh, want)
	}
	if again, _, _ := renderParamsBlocks(fresh); !bytes.Equal(again, fresh) {
		t.Error("a fresh block is rewritten")
	}
	for _, name := range []string{"shutdown", "no/such"} {
		if _, _, err := renderParamsBlocks([]byte("<!-- params " + name + ": generated -->\n<!-- end params -->\n")); err == nil {
			t.Errorf("a block naming %s is accepted", name)
		}
	}
	table := paramsTable([]wire.Param{{Name: "x", Summary: "a | b", Schema: `{"enum":["a|b"]}`}})
	row := strings.Split(strings.TrimSpace(table), "\n")[2]
	if strings.Count(row, `\|`) != 2 || strings.Count(strings.ReplaceAll(row, `\|`, ""), "|") != 5 {
		t.Errorf("a | in a cell splits it: %s", row)
	}
}
