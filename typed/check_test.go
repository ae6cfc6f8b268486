package typed

import (
	"fmt"
	"strings"
	"testing"
)

func TestChecksAreExact(t *testing.T) {
	cases := []struct {
		schema, value string
		ok            bool
	}{
		{`{"maximum":9007199254740993}`, `9007199254740993`, true},
		{`{"maximum":9007199254740993}`, `9007199254740994`, false},
		{`{"minimum":9007199254740993}`, `9007199254740992`, false},
		{`{"exclusiveMaximum":9007199254740993}`, `9007199254740993`, false},
		{`{"const":9007199254740993}`, `9007199254740992`, false},
		{`{"enum":[9007199254740993]}`, `9007199254740993`, true},
		{`{"enum":[9007199254740993]}`, `9007199254740992`, false},
		{`{"type":"integer"}`, `1.0`, true},
		{`{"type":"integer"}`, `1.5`, false},
		{`{"type":"integer"}`, `1e2`, true},
		{`{"multipleOf":0.1}`, `0.3`, true},
		{`{"multipleOf":0.1}`, `0.35`, false},
		{`{"multipleOf":3}`, `9007199254740993`, true},
		{`{"multipleOf":2}`, `9007199254740993`, false},
		{`{"maximum":0.3}`, `0.30000000000000001`, false},
	}
	for _, c := range cases {
		f := mustCompile(t, `{"name":"f","returns":`+c.schema+`}`)
		err := f.CheckResult([]byte(c.value))
		if (err == nil) != c.ok {
			t.Errorf("%s against %s: err = %v, want ok=%v", c.value, c.schema, err, c.ok)
		}
	}
}

func TestCheckErrorListsLocations(t *testing.T) {
	f := mustCompile(t, `{"name":"search","parameters":{"type":"object","additionalProperties":false,
		"properties":{"q":{"type":"string"},"limit":{"type":"integer","maximum":9007199254740993},
		"tags":{"type":"array","items":{"type":"string"}},"n":{"multipleOf":0.1},"m":{"exclusiveMinimum":2.5}},
		"required":["q","tags"]}}`)
	cases := []struct{ args, want string }{
		{`{"q":"x","tags":[],"limit":"10"}`, "/limit: expected integer, but got string"},
		{`{"q":"x","tags":[],"limit":9007199254740994}`, "/limit: must be <= 9007199254740993, but is 9007199254740994"},
		{`{"q":"x","tags":[],"n":0.25}`, "/n: must be a multiple of 0.1, but is 0.25"},
		{`{"q":"x","tags":[],"m":2.5}`, "/m: must be > 2.5, but is 2.5"},
		{`{}`, "/q: required property is missing\n/tags: required property is missing"},
		{`{"q":1,"tags":["a",2],"x~/y":0}`,
			"/q: expected string, but got number\n/tags/1: expected string, but got number\n/x~0~1y: property is not allowed"},
		{`[]`, "(root): expected object, but got array"},
	}
	for _, c := range cases {
		err := f.CheckArgs([]byte(c.args))
		if err == nil || err.Error() != c.want {
			t.Errorf("CheckArgs(%s) = %v\nwant %s", c.args, err, c.want)
		}
	}
	if err := f.CheckArgs([]byte(`{"q":"x","tags":["a"],"limit":3}`)); err != nil {
		t.Errorf("valid args refused: %v", err)
	}
}

func TestCheckErrorIsCappedAndStable(t *testing.T) {
	f := mustCompile(t, `{"name":"f","returns":{"type":"array","items":{"type":"string"}}}`)
	items := make([]string, 25)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	value := []byte("[" + strings.Join(items, ",") + "]")
	first := f.CheckResult(value).Error()
	lines := strings.Split(first, "\n")
	if len(lines) != MaxListed+1 || lines[MaxListed] != "and 15 more" {
		t.Fatalf("got %d lines, last %q:\n%s", len(lines), lines[len(lines)-1], first)
	}
	if lines[0] != "/0: expected string, but got number" {
		t.Errorf("first line %q", lines[0])
	}
	for range 20 {
		if again := f.CheckResult(value).Error(); again != first {
			t.Fatalf("order changed:\n%s\nthen\n%s", first, again)
		}
	}
}

func TestCheckRefusesNonJSON(t *testing.T) {
	f := mustCompile(t, `{"name":"f","returns":{}}`)
	if err := f.CheckResult([]byte(`{`)); err == nil || !strings.HasPrefix(err.Error(), "(root): not valid JSON") {
		t.Fatalf("err = %v", err)
	}
}

func TestCheckDeepValue(t *testing.T) {
	f := mustCompile(t, `{"name":"f","returns":{"type":"array","items":{"type":"array"}}}`)
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	if err := f.CheckResult([]byte(deep)); err != nil {
		t.Fatalf("100000-deep value refused: %v", err)
	}
	if err := f.CheckResult([]byte("[" + deep + ",1]")); err == nil || err.Error() != "/1: expected array, but got number" {
		t.Fatalf("err = %v", err)
	}
}

func TestDecodeInstance(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":[1,{"b":null}],"c":"d","e":{}}`, `map[a:[1 map[b:<nil>]] c:d e:map[]]`},
		{` 12345678901234567890 `, `12345678901234567890`},
		{`[]`, `[]`},
		{`"s"`, `s`},
	} {
		v, err := decodeInstance([]byte(c.in), false)
		if err != nil || fmt.Sprint(v) != c.want {
			t.Errorf("decodeInstance(%s) = %v, %v; want %s", c.in, v, err, c.want)
		}
	}
	for _, bad := range []string{``, `[1,]`, `{"a"}`, `[1] [2]`, `{"a":1`} {
		if _, err := decodeInstance([]byte(bad), false); err == nil {
			t.Errorf("decodeInstance(%q) accepted", bad)
		}
	}
}

// TestDecodeInstanceBoundsNumbers: a number with more than maxNumberDigits
// digits, or an exponent beyond ±maxNumberDigits, is refused before the
// library parses it (where 1E1000001 panicked and 1E999999 took tens of
// milliseconds); one within the bounds is kept.
func TestDecodeInstanceBoundsNumbers(t *testing.T) {
	many := strings.Repeat("7", maxNumberDigits)
	for _, ok := range []string{"1E4300", "-1e-4300", "0.5E+4300", many, "-0." + many[1:], "1E0000000000001"} {
		if _, err := decodeInstance([]byte(ok), false); err != nil {
			t.Errorf("decodeInstance(%.20s…) refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"1E4301", "1e-4301", "[0,1E1000001]", "1E99999999999999999999", many + "7", "0." + many} {
		_, err := decodeInstance([]byte(bad), false)
		if err == nil || !strings.Contains(err.Error(), "is too large to check: more than 4300 digits, or an exponent beyond ±4300") {
			t.Errorf("decodeInstance(%.20s…) = %v, want it refused as too large", bad, err)
		}
	}
	f, err := NewCache(4, 1<<20).Compile("p", []byte(`{"name":"f","parameters":{"type":"object","properties":{"n":{"multipleOf":1}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CheckArgs([]byte(`{"n":1E1000001}`)); err == nil || !strings.HasPrefix(err.Error(), "(root): the number at offset 5 is too large to check") {
		t.Errorf("CheckArgs = %v, want the number refused", err)
	}
}

// TestGuardedTurnsPanicsIntoErrors: a panic in a call into the schema
// library fails that call with an error; it never escapes.
func TestGuardedTurnsPanicsIntoErrors(t *testing.T) {
	err := guarded(func() error { panic("index out of range") })
	if err == nil || err.Error() != "the JSON Schema library failed: index out of range" {
		t.Errorf("guarded = %v", err)
	}
	if err := guarded(func() error { return nil }); err != nil {
		t.Errorf("guarded(no panic) = %v", err)
	}
}

func TestDecodeInstanceRefusesMalformed(t *testing.T) {
	for _, bad := range []string{`01`, `1.`, `.5`, `-`, `1e`, `+1`, `"a`, "\"\x01\"", `"\x"`, `tru`, `{"a":1,}`, `{,}`, `[,1]`, `{"a" 1}`, `{1:2}`, `[1}`, `{"a":1]`, `nul`, `"\ud800"x`} {
		if _, err := decodeInstance([]byte(bad), false); err == nil {
			t.Errorf("decodeInstance(%q) accepted", bad)
		}
	}
	v, err := decodeInstance([]byte(` {"a\n\u00e9":[-0.5e+3,true,false,null,"\"x\""]} `), false)
	if err != nil || fmt.Sprint(v) != `map[a`+"\n"+`é:[-0.5e+3 true false <nil> "x"]]` {
		t.Fatalf("got %v, %v", v, err)
	}
}

func TestTypeFailuresOfBranchesMerge(t *testing.T) {
	f := mustCompile(t, `{"name":"f","returns":{"type":"object","properties":{
		"a":{"anyOf":[{"type":"string"},{"type":"null"},{"type":["string","array"]}]},
		"b":{"oneOf":[{"type":"integer","minimum":5},{"type":"boolean"}]}}}}`)
	err := f.CheckResult([]byte(`{"a":1,"b":2}`))
	want := "/a: expected string or null or array, but got number\n/b: expected boolean, but got number\n/b: must be >= 5, but is 2"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// The fast check accepts nothing the library refuses; it has a form for the
// common keywords (and only for them) and accepts their matching values.
func TestFastCheckAgreesWithTheLibrary(t *testing.T) {
	schemas := []struct {
		schema string
		fast   bool
	}{
		{`{"type":"object","properties":{"i":{"type":"integer"}},"required":["i"],"additionalProperties":false}`, true},
		{`{"type":"object","properties":{"q":{"type":"string","minLength":1,"maxLength":3,"format":"date"},` +
			`"n":{"type":["integer","null"],"minimum":-2,"maximum":5},"e":{"enum":["a",true,null]},` +
			`"u":{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"number"}}]}},` +
			`"additionalProperties":{"type":"boolean"}}`, true},
		{`{"type":"array","items":{"type":"object","properties":{"x":true,"y":false}}}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"d":{"format":"date"}}}`, false},
		{`{"type":"number","multipleOf":0.5}`, false},
		{`{"enum":[1]}`, false},
		{`{"minimum":0.5}`, false},
		{`{"$defs":{"a":{}},"$ref":"#/$defs/a"}`, false},
	}
	values := []string{`null`, `true`, `0`, `-3`, `6`, `1.0`, `1e2`, `2.5`, `9007199254740993`, `99999999999999999999`,
		`""`, `"a"`, `"abcd"`, `"2024-01-01"`, `"é"`, `[]`, `[1,"a"]`, `[1.5,2]`, `{}`, `{"i":1}`, `{"i":"1"}`, `{"i":2.5}`, `{"i":1,"j":2}`,
		`{"q":"ab","n":null,"e":"a","u":[1,2.5]}`, `{"q":"abcd"}`, `{"q":""}`, `{"n":6}`, `{"n":1.0}`, `{"e":"b"}`, `{"e":null}`,
		`{"u":["x"]}`, `{"z":true}`, `{"z":1}`, `[{"x":1}]`, `[{"y":1}]`, `{"d":"nope"}`, `{"d":"2024-01-01"}`}
	for _, c := range schemas {
		f := mustCompile(t, `{"name":"f","returns":`+c.schema+`}`)
		if (f.returns.fast != nil) != c.fast {
			t.Errorf("%s: has a fast check: %v, want %v", c.schema, f.returns.fast != nil, c.fast)
			continue
		}
		accepted := 0
		for _, val := range values {
			v, err := decodeInstance([]byte(val), false)
			if err != nil {
				t.Fatal(err)
			}
			if f.returns.fast != nil && f.returns.fast.accepts(v) {
				accepted++
				if err := f.returns.compiled.Validate(v); err != nil {
					t.Errorf("%s against %s: the fast check accepts what the library refuses: %v", val, c.schema, err)
				}
			}
		}
		if c.fast && accepted == 0 {
			t.Errorf("%s: the fast check accepts none of the values", c.schema)
		}
	}
}
