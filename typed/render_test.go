package typed

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

var testLimits = protocol.Limits{CPUSeconds: 10, MaxWallMs: 30000, MaxLogBytes: 1 << 20, MaxValueBytes: 65536}

const testHeader = "# coderun-rpc: the functions this program can call, as a Python stub.\n" +
	"# Budgets: CPU 10 s, wall 30000 ms, log 1048576 bytes, value 65536 bytes.\n" +
	"# Python 3.11.7. Every function is async: await it.\n\n"

// namespaces compiles entries per global: {"tools": {`"a"`, `{...}`}}.
func namespaces(t testing.TB, spec ...any) []Namespace {
	t.Helper()
	var out []Namespace
	for i := 0; i < len(spec); i += 2 {
		ns := Namespace{Global: spec[i].(string)}
		for j, e := range spec[i+1].([]string) {
			ns.Functions = append(ns.Functions, mustCompileAt(t, fmt.Sprintf("bindings[%d].functions[%d]", i/2, j), e))
		}
		out = append(out, ns)
	}
	return out
}

func mustCompileAt(t testing.TB, at, entry string) *Function {
	t.Helper()
	f, err := Compile(at, []byte(entry))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRenderExact(t *testing.T) {
	cases := []struct {
		name string
		ns   []Namespace
		want string
	}{
		{"untyped and empty", namespaces(t, "tools", []string{`"lookup"`}, "web_api", []string{}), `from typing import Any

class Tools:
    async def lookup(self, args: Any = None) -> Any:
        ...

class WebApi:
    pass

tools: Tools
web_api: WebApi
`},
		{"typed", namespaces(t, "tools", []string{`{"name":"search","description":"Search the web.",
			"parameters":{"type":"object","properties":{
				"q":{"type":"string","description":"the query"},
				"limit":{"type":"integer","default":9007199254740993},
				"exact":{"type":"boolean","default":true},
				"lang":{"enum":["en","fr"],"default":"fr"},
				"filters":{"type":"object","properties":{"site":{"type":"string"},"max-age":{"type":"integer"}},"required":["site"]},
				"opts":{"type":"object","additionalProperties":{"type":"number"},"default":{"a":1,"b":2.5}},
				"tags":{"type":["array","null"],"items":{"type":"string"},"default":null},
				"bad":{"type":"integer","default":"ten"}},
			"required":["q"]},
			"returns":{"type":"array","items":{"type":"object","title":"hit","properties":{"url":{"type":"string"},"score":{"anyOf":[{"type":"number"},{"type":"null"}]}},"required":["url","score"]}}}`}), `from typing import Any, Literal, TypedDict

_SearchArgsFiltersRequired = TypedDict("_SearchArgsFiltersRequired", {"site": str})
_SearchArgsFiltersOptional = TypedDict("_SearchArgsFiltersOptional", {"max-age": int}, total=False)
class SearchArgsFilters(_SearchArgsFiltersRequired, _SearchArgsFiltersOptional):
    pass

class Hit(TypedDict):
    url: str
    score: float | None

class Tools:
    async def search(self, q: str, limit: int = 9007199254740993, exact: bool = True, lang: Literal["en", "fr"] = "fr", filters: SearchArgsFilters = ..., opts: dict[str, float] = {"a": 1, "b": 2.5}, tags: list[str] | None = None, bad: int = ...) -> list[Hit]:
        """Search the web.

        Args:
            q: the query
        """

tools: Tools
`},
		{"names and escapes", namespaces(t, "tools", []string{
			`{"name":"my-tool","description":"Two\nlines","parameters":{"type":"object","properties":{"a":{"type":"string"},"b-c":{"type":"integer"}},"required":["b-c"]}}`,
			`{"name":"quote","description":"say \"\"\"hi\"\"\" \\ and \u0000 end\""}`,
			`{"name":"node","returns":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}},"name":{"type":"string"}}}}`},
			"tools2", []string{`{"name":"node","returns":{"type":"object","properties":{"v":{"type":"integer"}},"required":["v"]}}`}), `from typing import Any, TypedDict

class NodeResult(TypedDict, total=False):
    kids: list[NodeResult]
    name: str

class NodeResult2(TypedDict):
    v: int

class Tools:
    # keyword arguments, passed as **{...}: "b-c": int
    # tools["my-tool"](a: str = ..., **kwargs: Any) -> Any
    #     Two
    #     lines

    async def quote(self, args: Any = None) -> Any:
        """say \"\""hi\"\"" \\ and \x00 end\""""

    async def node(self, args: Any = None) -> NodeResult:
        ...

class Tools2:
    async def node(self, args: Any = None) -> NodeResult2:
        ...

tools: Tools
tools2: Tools2
`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Render(testLimits, "3.11.7", c.ns).Text
			if got != testHeader+c.want {
				t.Errorf("got\n%s\nwant\n%s", got, testHeader+c.want)
			}
		})
	}
}

func TestRenderNamesStayUnique(t *testing.T) {
	entry := `{"name":"search","parameters":{"type":"object","properties":{"filters":{"type":"object","properties":{"a":{"type":"string"}}}}}}`
	text := Render(testLimits, "3.11", namespaces(t,
		"web_api", []string{entry, `{"name":"t","returns":{"title":"WebApi2","type":"object","properties":{"x":{"type":"string"}}}}`},
		"webApi", []string{strings.Replace(entry, `"a"`, `"b"`, 1)}, "more", []string{entry})).Text
	for _, want := range []string{
		"class WebApi:\n", "class WebApi2:\n", "web_api: WebApi\n", "webApi: WebApi2\n",
		"class SearchArgsFilters(TypedDict, total=False):", "class SearchArgsFilters2(TypedDict, total=False):",
		"class WebApi22(TypedDict, total=False):", "filters: SearchArgsFilters2 = ...",
	} {
		if strings.Count(text, want) != 1 {
			t.Errorf("%q appears %d times in\n%s", want, strings.Count(text, want), text)
		}
	}
	// The same declaration twice (one cached Function) shares its classes.
	if strings.Contains(text, "SearchArgsFilters3") || strings.Count(text, "filters: SearchArgsFilters = ...") != 2 {
		t.Errorf("a repeated declaration got classes of its own:\n%s", text)
	}
}

func TestRenderMethods(t *testing.T) {
	s := Render(testLimits, "3.11", namespaces(t, "tools", []string{
		`"lookup"`,
		`{"name":"search","description":"Find \"x\".","parameters":{"type":"object","properties":{"q":{"type":"string","description":"what"}},"required":["q"]}}`,
		`{"name":"my-tool"}`}))
	want := []Method{
		{Global: "tools", Name: "lookup", Stub: "async def lookup(self, args: Any = None) -> Any:\n    ...\n"},
		{Global: "tools", Name: "search", Doc: "Find \"x\".\n\nArgs:\n    q: what",
			Stub: "async def search(self, q: str) -> Any:\n    \"\"\"Find \"x\".\n\n    Args:\n        q: what\n    \"\"\"\n"},
		{Global: "tools", Name: "my-tool", Stub: "# tools[\"my-tool\"](args: Any = None) -> Any\n"},
	}
	if len(s.Methods) != len(want) {
		t.Fatalf("got %d methods", len(s.Methods))
	}
	want[1].Signature = &protocol.Signature{Params: []protocol.Param{{Name: "q", Required: true}}, Doc: want[1].Doc, Stub: want[1].Stub}
	for i, m := range s.Methods {
		if !reflect.DeepEqual(m, want[i]) {
			t.Errorf("method %d:\n got %#v\nwant %#v", i, m, want[i])
		}
		if !strings.Contains(s.Text, indent(m.Stub, "    ")) {
			t.Errorf("method %d's stub is not the module's text", i)
		}
	}
}

func TestCamel(t *testing.T) {
	for in, want := range map[string]string{"tools": "Tools", "web_api": "WebApi", "webApi": "WebApi", "x-y z": "XYZ", "2fa": "T2fa", "": "T", "ñu": "U"} {
		if got := camel(in); got != want {
			t.Errorf("camel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFunctionMethodMatchesRender(t *testing.T) {
	ns := namespaces(t, "tools", []string{
		`{"name":"search","description":"Find.","parameters":{"type":"object","properties":{"f":{"type":"object","properties":{"a":{"type":"string"}}}}}}`,
		`{"name":"my-tool","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}`})
	s := Render(testLimits, "3.11", ns)
	for i, f := range ns[0].Functions {
		if got := f.Method("tools"); !reflect.DeepEqual(got, s.Methods[i]) {
			t.Errorf("Method = %#v\nRender has %#v", got, s.Methods[i])
		}
		if again := f.Method("tools"); again.Signature != f.Method("tools").Signature {
			t.Error("memoized method changed")
		}
	}
	if m := ns[0].Functions[1].Method("web"); m.Stub != "# web[\"my-tool\"](a: int = ...) -> Any\n" {
		t.Errorf("under another global: %q", m.Stub)
	}
}

func TestRenderNamesUntitledDefsAfterFunctionAndRole(t *testing.T) {
	text := Render(testLimits, "3.11", namespaces(t, "tools", []string{`{"name":"search",
		"parameters":{"type":"object","$defs":{"range":{"type":"object","properties":{"lo":{"type":"integer"}}}},"properties":{"r":{"$ref":"#/$defs/range"},"r2":{"$ref":"#/$defs/range"}}},
		"returns":{"type":"array","items":{"$ref":"#/$defs/hit"},"$defs":{"hit":{"type":"object","properties":{"url":{"type":"string"}}}}}}`})).Text
	for _, want := range []string{"class SearchArgsRange(TypedDict, total=False):", "class SearchResultHit(TypedDict, total=False):",
		"r: SearchArgsRange = ..., r2: SearchArgsRange = ...", "-> list[SearchResultHit]:"} {
		if strings.Count(text, want) != 1 {
			t.Errorf("%q appears %d times in\n%s", want, strings.Count(text, want), text)
		}
	}
}

func TestMethodSignature(t *testing.T) {
	ns := namespaces(t, "tools", []string{
		`{"name":"search","description":"Find.","parameters":{"type":"object","required":["q"],"properties":{` +
			`"limit":{"type":"integer","default":10},"q":{"type":"string","description":"query"},` +
			`"mode":{"type":"string","default":3},"max-results":{"type":"integer","default":5},"tag":{"default":null}}}}`,
		`{"name":"plain","returns":{"type":"integer"}}`, `"old"`})
	got, err := json.Marshal(ns[0].Functions[0].Method("tools").Signature)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"params":[{"name":"q","required":true},{"name":"limit","required":false,"default":"10"},` +
		`{"name":"mode","required":false},{"name":"max-results","required":false,"default":"5"},` +
		`{"name":"tag","required":false,"default":"None"}],` +
		`"doc":"Find.\n\nArgs:\n    q: query","stub":` + jsonString(ns[0].Functions[0].Method("tools").Stub) + `}`
	if string(got) != want {
		t.Errorf("signature\n got %s\nwant %s", got, want)
	}
	for _, f := range ns[0].Functions[1:] {
		if sig := f.Method("tools").Signature; sig != nil {
			t.Errorf("%s has no parameters, yet a signature %+v", f.Name, sig)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
