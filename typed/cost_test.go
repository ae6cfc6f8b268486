package typed

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// bombParams is a parameters schema whose two array alternatives both recurse:
// a library check of x nested d deep around a value both refuse tries 2^d paths.
const bombParams = `{"type":"object","properties":{"x":{"$ref":"#/$defs/v"}},"$defs":{"v":{"anyOf":[` +
	`{"type":"array","items":{"$ref":"#/$defs/v"}},{"type":"array","items":{"$ref":"#/$defs/v"},"minItems":1},` +
	`{"type":"string"}]}}}`

// nested is {"x":[[…[leaf]…]]}, d arrays deep.
func nested(d int, leaf string) []byte {
	return []byte(`{"x":` + strings.Repeat("[", d) + leaf + strings.Repeat("]", d) + `}`)
}

// A check whose work would exceed MaxCheckSteps is refused as too costly,
// before the library starts, both ways; the same schema still checks
// shallow values, and the error says why.
func TestC620CheckTooCostlyIsRefused(t *testing.T) {
	f := mustCompile(t, `{"name":"bomb","parameters":`+bombParams+`,"returns":`+bombParams+`}`)
	for _, check := range []func([]byte) error{f.CheckArgs, f.CheckResult} {
		err := check(nested(64, "1"))
		if !errors.Is(err, ErrTooCostly) {
			t.Fatalf("depth 64: err = %v, want ErrTooCostly", err)
		}
		if !strings.Contains(err.Error(), "too costly") {
			t.Errorf("error does not say the check was too costly: %v", err)
		}
		if err := check(nested(4, `"leaf"`)); err != nil {
			t.Errorf("depth 4, a string leaf: %v", err)
		}
		if err := check(nested(4, "1")); err == nil || errors.Is(err, ErrTooCostly) {
			t.Errorf("depth 4, a number leaf: err = %v, want a schema failure", err)
		}
	}
}

// Large values under a schema without blow-up stay within the budget: the
// budget counts work per (subschema, value) pair, not the value's size alone.
func TestC620CheckBudgetAdmitsLargeOrdinaryValues(t *testing.T) {
	f := mustCompile(t, `{"name":"rows","parameters":{"type":"object","properties":{"rows":{"type":"array",
		"items":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id"]}}}}}`)
	var sb strings.Builder
	sb.WriteString(`{"rows":[`)
	for i := range 5000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"id":"not an integer","name":"n"}`) // refused: the library runs
	}
	sb.WriteString(`]}`)
	err := f.CheckArgs([]byte(sb.String()))
	if err == nil || errors.Is(err, ErrTooCostly) {
		t.Fatalf("5000 rows: err = %v, want the schema's own failures", err)
	}
}

// Duplicate keys are refused in arguments (the check would read the last,
// a receiver may read the first), at any depth; results keep the last, as
// the program's own parser does.
func TestC622CheckArgsRefusesDuplicateKeys(t *testing.T) {
	f := mustCompile(t, `{"name":"open","parameters":{"type":"object","properties":{"path":{"type":"string","pattern":"^/safe/"},
		"opts":{"type":"object"}},"additionalProperties":false},"returns":{"type":"object"}}`)
	for _, args := range []string{
		`{"path":"/etc/passwd","path":"/safe/x"}`,
		`{"path":"/safe/x","opts":{"a":1,"a":2}}`,
		`{"pa\u0074h":"/etc/passwd","path":"/safe/x"}`,
		`{"path":"/safe/x","opts":{},"pa\u0074h":"/etc/passwd"}`,
		`{"path":"/safe/x","opts":{"\ud800":1,"\uD800":2}}`,
	} {
		err := f.CheckArgs([]byte(args))
		if err == nil || !strings.Contains(err.Error(), `duplicate key`) {
			t.Errorf("CheckArgs(%s) = %v, want a duplicate key refusal", args, err)
		}
	}
	for _, args := range []string{
		`{"path":"/safe/x","opts":{"a":1,"b":{"a":2}}}`,
		`{"path":"/safe/x","opts":{"\ud800":1,"\ud801":2}}`, // two lone surrogates: two keys to a receiver
	} {
		if err := f.CheckArgs([]byte(args)); err != nil {
			t.Errorf("CheckArgs(%s) = %v, want accepted", args, err)
		}
	}
	if err := f.CheckResult([]byte(`{"a":1,"a":2}`)); err != nil {
		t.Errorf("CheckResult with a duplicate key: %v, want accepted (last wins)", err)
	}
}

// wideUnion is a schema written only with fast-check keywords whose two
// alternatives at each of d levels are both tried: the first leads only to
// integer leaves, so integers ending in a string are accepted only along the
// last alternative, after every other one was tried on every item.
func wideUnion(d int, allSecond bool) string {
	if d == 0 {
		if allSecond {
			return `{"type":["integer","string"]}`
		}
		return `{"type":"integer"}`
	}
	return `{"anyOf":[{"type":"array","items":` + wideUnion(d-1, false) + `},{"type":"array","items":` + wideUnion(d-1, allSecond) + `}]}`
}

// The fast check is bounded as well (MaxFastSteps): a value it would accept
// only after millions of pairs is left to the budget, which refuses it, and
// the same schema still accepts a small value.
func TestC620FastCheckBounded(t *testing.T) {
	f := mustCompile(t, `{"name":"wide","returns":`+wideUnion(9, true)+`}`)
	if f.returns.fast == nil {
		t.Fatal("the schema has no fast check")
	}
	wide := strings.Repeat("[", 9) + strings.Repeat(`1,`, 9999) + `"a"` + strings.Repeat("]", 9)
	if err := f.CheckResult([]byte(wide)); !errors.Is(err, ErrTooCostly) {
		t.Errorf("9 999 integers and a string 9 deep: err = %v, want ErrTooCostly", err)
	}
	if err := f.CheckResult([]byte(strings.Repeat("[", 9) + `"a"` + strings.Repeat("]", 9))); err != nil {
		t.Errorf("one string 9 deep: %v", err)
	}
}

// A pair costs its schema's lists too: a schema that requires 20 000 names at
// every level of a 100-deep value (2 M name lookups) is refused as too
// costly, while one level of it is checked.
func TestC620CheckBudgetCountsSchemaLists(t *testing.T) {
	names := make([]string, 20000)
	for i := range names {
		names[i] = `"p` + strconv.Itoa(i) + `"`
	}
	f := mustCompile(t, `{"name":"req","returns":{"type":["object","array"],"required":[`+strings.Join(names, ",")+`],"items":{"$ref":"#"}}}`)
	deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	if err := f.CheckResult([]byte(deep)); !errors.Is(err, ErrTooCostly) {
		t.Errorf("100 deep: err = %v, want ErrTooCostly", err)
	}
	if err := f.CheckResult([]byte(`{}`)); err == nil || errors.Is(err, ErrTooCostly) {
		t.Errorf("{}: err = %v, want the missing names", err)
	}
}

// A pair costs its depth too (the library's failures copy their location):
// 500 levels of 20 failing strings and the next level (the library took
// 170 ms to list the 10 000 failures, 500 tokens each) is too costly, while
// 20 levels of it get the schema's failures.
func TestC620CheckBudgetCountsDepth(t *testing.T) {
	f := mustCompile(t, `{"name":"deep","returns":{"type":"array","items":{"$ref":"#"}}}`)
	level := `["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t",`
	deep := func(d int) []byte { return []byte(strings.Repeat(level, d) + "[]" + strings.Repeat("]", d)) }
	if err := f.CheckResult(deep(500)); !errors.Is(err, ErrTooCostly) {
		t.Errorf("500 levels: err = %.80v, want ErrTooCostly", err)
	}
	if err := f.CheckResult(deep(20)); err == nil || errors.Is(err, ErrTooCostly) {
		t.Errorf("20 levels: err = %.80v, want the schema's failures", err)
	}
}

// A pair costs the length of a string it may scan: 4 000 patterns tried on
// one string of 1 MiB (4 GB of matching) is too costly, on a short one it is
// checked; 4 000 patterns on the keys of an object likewise.
func TestC620CheckBudgetCountsStrings(t *testing.T) {
	branches := make([]string, 4000)
	for i := range branches {
		branches[i] = `{"pattern":"x` + strconv.Itoa(i) + `$"}`
	}
	union := `{"anyOf":[` + strings.Join(branches, ",") + `]}`
	f := mustCompile(t, `{"name":"scan","returns":`+union+`}`)
	if err := f.CheckResult([]byte(`"` + strings.Repeat("a", 1<<20) + `"`)); !errors.Is(err, ErrTooCostly) {
		t.Errorf("1 MiB string: err = %.80v, want ErrTooCostly", err)
	}
	if err := f.CheckResult([]byte(`"ax7"`)); err != nil {
		t.Errorf("a short matching string: %v", err)
	}
	patterns := make([]string, 4000)
	for i := range patterns {
		patterns[i] = `"x` + strconv.Itoa(i) + `$":{}`
	}
	g := mustCompile(t, `{"name":"keys","returns":{"patternProperties":{`+strings.Join(patterns, ",")+`}}}`)
	if err := g.CheckResult([]byte(`{"` + strings.Repeat("a", 1<<20) + `":1}`)); !errors.Is(err, ErrTooCostly) {
		t.Errorf("a 1 MiB key: err = %.80v, want ErrTooCostly", err)
	}
}

// The fast check pays for the strings it measures: 4 000 maxLength
// alternatives over a 4 MiB string give up on the fast check (the budget then
// refuses the value), one alternative over a short string is accepted.
func TestC620FastCheckCountsStrings(t *testing.T) {
	branches := make([]string, 4000)
	for i := range branches {
		branches[i] = `{"type":"string","maxLength":` + strconv.Itoa(i) + `}`
	}
	f := mustCompile(t, `{"name":"len","returns":{"anyOf":[`+strings.Join(branches, ",")+`]}}`)
	if f.returns.fast == nil {
		t.Fatal("the schema has no fast check")
	}
	v, err := decodeInstance([]byte(`"`+strings.Repeat("a", 4<<20)+`"`), false)
	if err != nil {
		t.Fatal(err)
	}
	steps := MaxFastSteps
	if f.returns.fast.within(v, &steps) || steps >= 0 {
		t.Errorf("4 000 lengths of a 4 MiB string: accepted or within the budget (%d steps left)", steps)
	}
	if err := f.CheckResult([]byte(`"ab"`)); err != nil {
		t.Errorf("a short string: %v", err)
	}
}
