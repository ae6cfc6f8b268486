package typed

import (
	"strings"
	"testing"
)

// FuzzRender: any schema bytes, as parameters or returns of an entry, give
// either a declaration error or stubs that parse as Python.
func FuzzRender(f *testing.F) {
	for _, m := range corpus {
		for i := 1; i < len(m); i += 2 {
			for _, e := range m[i].([]string) {
				f.Add(e, "")
			}
		}
	}
	f.Add(`{"name":"f","returns":{"$ref":"#"}}`, "")
	f.Add(`{"name":"f"}`, `{"type":"object","properties":{"a\"\"\"":{"default":"\\"}}}`)
	f.Fuzz(func(t *testing.T, entry, params string) {
		if params != "" {
			entry = `{"name":"f","description":` + quoteJSON(entry) + `,"parameters":` + params + `,"returns":` + params + `}`
		}
		fn, err := NewCache(4, 1<<20).Compile("p", []byte(entry))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "p") {
				t.Fatalf("error without the path: %v", err)
			}
			return
		}
		stubs := Render(testLimits, "3.10", []Namespace{{Global: "tools", Functions: []*Function{fn, fn}}})
		if err := processAST(t).parse(stubs.Text); err != nil {
			t.Fatalf("stubs do not parse: %v\n%s", err, stubs.Text)
		}
	})
}

// FuzzCheck: compiling any entry and checking any value never panics, a
// check error is bounded, the fast check accepts nothing the library
// refuses, and a check the budget admits is one the library finishes (the
// fuzzer's own per-input timeout catches a blow-up).
func FuzzCheck(f *testing.F) {
	f.Add(`{"type":"object","properties":{"n":{"maximum":9007199254740993,"multipleOf":0.1}}}`, `{"n":9007199254740994}`)
	f.Add(`{"type":"object","additionalProperties":false}`, `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11}`)
	f.Add(`{"type":"object","properties":{"s":{"pattern":"^a+$"}}}`, `{"s":"aaaa"}`)
	f.Add(`{"type":"object","properties":{"n":{"multipleOf":1}}}`, `{"n":1E1000001}`)
	f.Add(`{"type":"object","properties":{"n":{"minimum":1E1000001}}}`, `{"n":1E999999}`)
	f.Add(bombParams, string(nested(40, "1")))
	f.Add(`{"type":"object"}`, `{"a":1,"a":2}`)
	f.Fuzz(func(t *testing.T, params, args string) {
		fn, err := NewCache(4, 1<<20).Compile("p", []byte(`{"name":"f","parameters":`+params+`,"returns":`+params+`}`))
		if err != nil {
			return
		}
		for _, check := range []func([]byte) error{fn.CheckArgs, fn.CheckResult} {
			if err := check([]byte(args)); err != nil && strings.Count(err.Error(), "\n") > MaxListed {
				t.Fatalf("error lists more than %d lines: %v", MaxListed, err)
			}
		}
		if v, err := decodeInstance([]byte(args), true); err == nil && fn.params != nil && fn.params.fast != nil && fn.params.fast.accepts(v) {
			if err := fn.params.compiled.Validate(v); err != nil {
				t.Fatalf("the fast check accepts what the library refuses: %v", err)
			}
		}
	})
}

func quoteJSON(s string) string {
	b := appendJSON(nil, s)
	return string(b)
}
