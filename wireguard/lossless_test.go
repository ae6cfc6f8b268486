package wireguard

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

const noBudget = math.MaxInt64

func check(t *testing.T, raw string, budget int64) ([]byte, Verdict) {
	t.Helper()
	return CheckValue([]byte(raw), budget)
}

// C210: the meter is exact, and the encoder's output is the compact input.
func TestMeterExact(t *testing.T) {
	for _, raw := range []string{
		`null`, `true`, `false`, `0`, `-1.5`, `"a\"b\\"`, `[]`, `{}`,
		`[1,"x",null]`, `{"a":[1,2],"b":{"c":"d"}}`,
	} {
		n := int64(len(raw))
		canon, v := check(t, raw, n)
		if v != VerdictOK || string(canon) != raw {
			t.Errorf("%s at %d: %v %s", raw, n, v, canon)
		}
		if _, v := check(t, raw, n-1); v != VerdictOverBudget {
			t.Errorf("%s at %d: %v, want over-budget", raw, n-1, v)
		}
	}
}

// C212, C213 and the docs/child-protocol-wire.md §2.7 metering examples: value, exact canonical length.
func TestMeterCanonicalLength(t *testing.T) {
	for _, c := range []struct {
		raw   string
		n     int64
		canon string
	}{
		{`"\u0000"`, 8, `"\u0000"`},
		{`"é"`, 4, `"é"`},
		{`"\u00e9"`, 4, `"é"`},
		{`"😀"`, 6, `"😀"`},
		{`"\ud83d\ude00"`, 6, `"😀"`},
		{`"\ud800"`, 8, `"\ud800"`},
		{`"\uD800"`, 8, `"\ud800"`},
		{`"\ud800a"`, 9, `"\ud800a"`},
		{`"\udc00\ud800"`, 14, `"\udc00\ud800"`},
		{`"\ud800\u0041"`, 9, `"\ud800A"`},
		{`"中"`, 5, `"中"`},
		{`{ "own" : 1 }`, 9, `{"own":1}`},
		{`1.0`, 1, `1`},
		{`1E2`, 3, `100`},
		{`1e-400`, 1, `0`},
		{`"\/\b\f\n\r\t\u001f\u007f"`, 20, "\"/\\b\\f\\n\\r\\t\\u001f\x7f\""},
		{`"\u2028<>&"`, 8, "\"\u2028<>&\""},
		{` [ 1 , { "a" : "b" } ] `, 13, `[1,{"a":"b"}]`},
		{`{"a":1,"a":2}`, 13, `{"a":1,"a":2}`}, // C208: duplicates pass unmerged
		{`{"\u0061":1}`, 7, `{"a":1}`},
		{`[1152921504606846976]`, 21, `[1152921504606846976]`}, // C217
		{`[1e21,1.7976931348623157e308,5e-324]`, 38, `[1e+21,1.7976931348623157e+308,5e-324]`},
	} {
		canon, v := check(t, c.raw, c.n)
		if v != VerdictOK || string(canon) != c.canon || int64(len(canon)) != c.n {
			t.Errorf("%s at %d: %v %s", c.raw, c.n, v, canon)
		}
		if _, v := check(t, c.raw, c.n-1); v != VerdictOverBudget {
			t.Errorf("%s at %d: %v, want over-budget", c.raw, c.n-1, v)
		}
	}
}

// C212: budgets against strings.
func TestMeterStringBudgets(t *testing.T) {
	nuls := `"` + strings.Repeat(`\u0000`, 200) + `"`
	for _, c := range []struct {
		raw    string
		budget int64
		want   Verdict
	}{
		{nuls, 1024, VerdictOverBudget},
		{`{` + nuls + `:1}`, 1024, VerdictOverBudget},
		{`"x"`, 1, VerdictOverBudget},
		{`"\ud800"`, 8, VerdictOK},
	} {
		if _, v := check(t, c.raw, c.budget); v != c.want {
			t.Errorf("%.20s… at %d: %v, want %v", c.raw, c.budget, v, c.want)
		}
	}
}

// C206, C214, C215: non-lossless numbers, and over-budget before non-lossless.
func TestCheckValueVerdicts(t *testing.T) {
	deep5 := `[[[[{"a":-0}]]]]`
	x1000 := `"` + strings.Repeat("x", 1000) + `"`
	for _, c := range []struct {
		raw    string
		budget int64
		want   Verdict
	}{
		{`1e400`, noBudget, VerdictNonLossless},
		{`-1e400`, noBudget, VerdictNonLossless},
		{`-0`, noBudget, VerdictNonLossless},
		{`-0.0`, noBudget, VerdictNonLossless},
		{`-0e5`, noBudget, VerdictNonLossless},
		{`-1e-400`, noBudget, VerdictNonLossless},
		{deep5, noBudget, VerdictNonLossless},
		{`[[1], {"a": 2}, 1e400]`, noBudget, VerdictNonLossless},
		{`9007199254740993`, noBudget, VerdictNonLossless},
		{`[[1], {"a": 2}, 0]`, noBudget, VerdictOK},
		{`["` + strings.Repeat("x", 1000) + `", 1e400]`, 100, VerdictOverBudget},
		{`[1e400, ` + x1000 + `]`, 100, VerdictOverBudget},
		{`[1e400]`, 100, VerdictNonLossless},
		{`[1e400]`, 10, VerdictNonLossless}, // [Infinity] is exactly 10
		{`[1e400]`, 3, VerdictOverBudget},
		{`1e400`, 3, VerdictOverBudget},
		{`-1e400`, 8, VerdictOverBudget}, // -Infinity is 9
		{`-0`, 1, VerdictNonLossless},    // meters 1 (spelled 0)
		{`[1,]`, noBudget, VerdictNonLossless},
		{`"\ud800" x`, noBudget, VerdictNonLossless},
		{"\"\xff\"", noBudget, VerdictNonLossless},
	} {
		if _, v := check(t, c.raw, c.budget); v != c.want {
			t.Errorf("%.30s at %d: %v, want %v", c.raw, c.budget, v, c.want)
		}
	}
}

// C207, C218: wide values are walked one member at a time.
func TestCheckValueWide(t *testing.T) {
	zeros := "[" + strings.Repeat("0,", 1999999) + "0]"
	n := int64(len(zeros))
	if _, v := check(t, zeros, n); v != VerdictOK {
		t.Errorf("2 000 000 zeros at exact size: %v", v)
	}
	if _, v := check(t, zeros, n-1); v != VerdictOverBudget {
		t.Errorf("2 000 000 zeros at one less: %v", v)
	}
	negLast := zeros[:len(zeros)-2] + "-0]"
	if _, v := check(t, negLast, n+1); v != VerdictNonLossless {
		t.Errorf("-0 last: %v", v)
	}
	var obj strings.Builder
	obj.WriteByte('{')
	for i := range 100000 {
		if i > 0 {
			obj.WriteByte(',')
		}
		obj.WriteString(`"k`)
		obj.WriteString(strings.Repeat("x", i%7))
		obj.WriteString(`":0`)
	}
	obj.WriteByte('}')
	o := obj.String()
	if _, v := check(t, o, int64(len(o))); v != VerdictOK {
		t.Errorf("100 000 members at exact size: %v", v)
	}
	if _, v := check(t, o, int64(len(o))-1); v != VerdictOverBudget {
		t.Errorf("100 000 members at one less: %v", v)
	}
	if _, v := check(t, strings.Replace(o, ":0}", ":-0}", 1), noBudget); v != VerdictNonLossless {
		t.Errorf("-0 member: %v", v)
	}
	wide := "{" + strings.Repeat(`"k":[],`, 199999) + `"k":[]}` // C207: 200 000 members
	if canon, v := check(t, wide, noBudget); v != VerdictOK || string(canon) != wide {
		t.Errorf("200 000 members: %v", v)
	}
}

// C206, C216: 100 000 nested arrays around 0 meter 200001 bytes and encode
// without recursion.
func TestCheckValueDeep(t *testing.T) {
	const depth = 100000
	deep := strings.Repeat("[", depth) + "0" + strings.Repeat("]", depth)
	canon, v := check(t, deep, noBudget)
	if v != VerdictOK || len(canon) != 200001 || string(canon) != deep {
		t.Fatalf("deep: %v, %d bytes", v, len(canon))
	}
	if _, v := check(t, strings.Replace(deep, "0", "-0", 1), noBudget); v != VerdictNonLossless {
		t.Fatalf("deep -0: %v", v)
	}
	spaced := strings.Repeat("[ ", depth) + "0" + strings.Repeat(" ]", depth)
	if canon, ok := CheckClientResult([]byte(spaced)); !ok || string(canon) != deep {
		t.Fatalf("deep client result: %v", ok)
	}
}

// C211: over-budget is found before secondary allocations.
func TestOverBudgetAllocatesLittle(t *testing.T) {
	for _, c := range []struct {
		raw    []byte
		budget int64
	}{
		{[]byte(`{"data": "` + strings.Repeat("x", 1000000) + `"}`), 1024},
		{append(append([]byte("["), bytes.Repeat([]byte("1,"), 9999999)...), "1]"...), 1024},
		{[]byte(`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10}`), 12},
	} {
		least := leastAlloc(func() {
			if _, v := CheckValue(c.raw, c.budget); v != VerdictOverBudget {
				t.Errorf("%.20s…: %v", c.raw, v)
			}
		})
		if least > 4096 {
			t.Errorf("%.20s…: allocated %d bytes", c.raw, least)
		}
	}
}

// docs/child-protocol-wire.md §2.9: client results are judged on their raw text.
func TestCheckClientResult(t *testing.T) {
	for _, c := range []struct {
		raw   string
		ok    bool
		canon string
	}{
		{`null`, true, `null`},
		{` {"b": [1.0, "\u00e9"]} `, true, `{"b":[1,"é"]}`},
		{`"\ud800"`, true, `"\ud800"`},
		{`-0`, false, ``},
		{`1e400`, false, ``},
		{`9007199254740993`, false, ``},
		{`{"a":9007199254740993}`, false, ``},
		{`["9007199254740993"]`, true, `["9007199254740993"]`},
		{"\"\xff\"", false, ``},
		{"\"\xed\xa0\x80\"", false, ``},
		{`{"a":1`, false, ``},
		{``, false, ``},
		{`1 2`, false, ``},
	} {
		canon, ok := CheckClientResult([]byte(c.raw))
		if ok != c.ok || string(canon) != c.canon {
			t.Errorf("%q: %v %s, want %v %s", c.raw, ok, canon, c.ok, c.canon)
		}
	}
}
