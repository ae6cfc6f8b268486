package wireguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidModes(t *testing.T) {
	for _, ok := range []string{`0`, `-0.5e+3`, `"\u00e9\ud800"`, `{"a":[1,{"b":null}],"c":true}`, `[ ]`, `{ }`, "[1 ,\t2]", " \r\n7\t"} {
		if !Valid([]byte(ok), Strict) || !Valid([]byte(ok), Lax) {
			t.Errorf("%q rejected", ok)
		}
	}
	for _, bad := range []string{``, ` `, `01`, `1.`, `.5`, `+1`, `[1,]`, `{"a"}`, `{"a":1,}`, `"\x"`, "\"\x01\"", `tru`, `[`,
		`"abc`, `{1:2}`, `"\u12"`, `1 2`, "\xff", "[\xff]", "{\"a\":1}\xff"} {
		if Valid([]byte(bad), Strict) || Valid([]byte(bad), Lax) {
			t.Errorf("%q accepted", bad)
		}
	}
	// Invalid UTF-8 inside a string, an encoded surrogate included, is Lax's one
	// relaxation.
	for _, s := range []string{"\"\xff\"", "\"\xed\xa0\x80\"", "{\"\xc0\xaf\":1}", "[\"a\xe2\x82\"]"} {
		if Valid([]byte(s), Strict) || !Valid([]byte(s), Lax) {
			t.Errorf("%q: strict %v, lax %v", s, Valid([]byte(s), Strict), Valid([]byte(s), Lax))
		}
	}
}

func TestMembers(t *testing.T) {
	raw := []byte(" {\"a\":1, \"\\u0062\" : [true,{\"c\":null}] ,\"a\":\"x\",\"\\ud800\":{}} ")
	ms, err := Members(raw, Strict)
	want := []Member{{"a", []byte("1"), false}, {"b", []byte(`[true,{"c":null}]`), false},
		{"a", []byte(`"x"`), false}, {"\xed\xa0\x80", []byte(`{}`), false}}
	if err != nil || !reflect.DeepEqual(ms, want) {
		t.Fatalf("Members = %+v, %v\nwant %+v", ms, err, want)
	}
	if m, ok := Last(ms, "a"); !ok || string(m.Value) != `"x"` {
		t.Errorf("Last(a) = %q %v", m.Value, ok)
	}
	if _, ok := Last(ms, "z"); ok {
		t.Error("Last found an absent name")
	}
	if ms, err := Members([]byte("{}"), Strict); err != nil || ms == nil || len(ms) != 0 {
		t.Errorf("empty object: %v %v", ms, err)
	}
	for _, c := range []struct {
		raw  string
		mode Mode
		err  error
	}{
		{`[1]`, Strict, ErrNotObject}, {`"x"`, Lax, ErrNotObject}, {`null`, Strict, ErrNotObject},
		{`[1`, Strict, ErrSyntax}, {`{"a":1}}`, Strict, ErrSyntax}, {`{"a":1,"b"}`, Lax, ErrSyntax},
		{"{\"a\":\"\xff\"}", Strict, ErrSyntax}, {"[\"\xff\"]", Lax, ErrNotObject}, {"[\"\xff\"]", Strict, ErrSyntax},
	} {
		if _, err := Members([]byte(c.raw), c.mode); !errors.Is(err, c.err) {
			t.Errorf("Members(%q, %d) error %v, want %v", c.raw, c.mode, err, c.err)
		}
	}
}

// In Lax mode invalid UTF-8 is reported on the member that holds it, in its name or
// anywhere in its value, and kept byte for byte.
func TestMembersLax(t *testing.T) {
	raw := []byte("{\"ok\":[\"fine\"],\"v\":{\"x\":[\"\xff\"]},\"n\xfe\":2}")
	ms, err := Members(raw, Lax)
	if err != nil || len(ms) != 3 {
		t.Fatalf("%+v %v", ms, err)
	}
	for i, bad := range []bool{false, true, true} {
		if ms[i].BadUTF8 != bad {
			t.Errorf("member %q: BadUTF8 %v", ms[i].Name, ms[i].BadUTF8)
		}
	}
	if ms[1].Name != "v" || string(ms[1].Value) != "{\"x\":[\"\xff\"]}" || ms[2].Name != "n\xfe" {
		t.Errorf("%+v", ms)
	}
}

func TestElements(t *testing.T) {
	elems, ok := Elements([]byte(` [ 1 , "a" ,[[]], {"b":2} ] `))
	if want := []string{`1`, `"a"`, `[[]]`, `{"b":2}`}; !ok || len(elems) != len(want) {
		t.Fatalf("%q %v", elems, ok)
	} else {
		for i := range want {
			if string(elems[i]) != want[i] {
				t.Errorf("element %d = %s, want %s", i, elems[i], want[i])
			}
		}
	}
	if elems, ok := Elements([]byte(`[]`)); !ok || elems == nil || len(elems) != 0 {
		t.Errorf("empty array: %q %v", elems, ok)
	}
	for _, bad := range []string{`{}`, `[1,]`, `[1] 2`, "[\"\xff\"]", `"x"`, ``} {
		if _, ok := Elements([]byte(bad)); ok {
			t.Errorf("Elements(%q) accepted", bad)
		}
	}
}

func TestDecodeString(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`"\ud83d\ude00\ud800\n\"\/"`, "😀\xed\xa0\x80\n\"/"},
		{` "é" `, "é"},
		{`""`, ""},
	} {
		if got, ok := DecodeString([]byte(c.raw)); !ok || got != c.want {
			t.Errorf("DecodeString(%s) = %q %v, want %q", c.raw, got, ok, c.want)
		}
	}
	for _, bad := range []string{`1`, `"a" "b"`, `"a`, "\"\xff\"", `["a"]`, ``, `"\q"`} {
		if _, ok := DecodeString([]byte(bad)); ok {
			t.Errorf("DecodeString(%q) accepted", bad)
		}
	}
}

func TestKindOf(t *testing.T) {
	for raw, k := range map[string]Kind{`{}`: KindObject, `[]`: KindArray, `"a"`: KindString, `-1`: KindNumber,
		`7`: KindNumber, `true`: KindTrue, `false`: KindFalse, `null`: KindNull, ``: KindNone} {
		if got := KindOf([]byte(raw)); got != k {
			t.Errorf("KindOf(%q) = %q, want %q", raw, got, k)
		}
	}
}

// A 100 000-deep value is scanned in both modes without recursion.
func TestMembersDeep(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	for _, mode := range []Mode{Strict, Lax} {
		ms, err := Members([]byte(`{"d":`+deep+`}`), mode)
		if err != nil || len(ms) != 1 || len(ms[0].Value) != len(deep) {
			t.Fatalf("mode %d: %v", mode, err)
		}
	}
}

// FuzzScan fuzzes the one scanner in both modes against encoding/json, whose scanner
// accepts any byte from 0x20 up inside a string (as Lax does) and decodes lone
// surrogates and invalid UTF-8 to U+FFFD: Lax accepts what encoding/json accepts,
// Strict what it accepts in valid UTF-8; Members and Elements carve out the values
// json.Decoder reads, in order; DecodeString agrees with json.Unmarshal where no
// surrogate escape is involved.
func FuzzScan(f *testing.F) {
	for _, v := range append(catalogueValues, `{"a":1,"b":[2,{"c":"\ud83d\ude00"}],"a":"\u00e9"}`,
		"{\"a\":\"\xff\",\"b\xfe\":1}", `[ "x" , [] , {} ]`, ` "a\"\\\/\b\f\n\r\t" `, "[\"\xed\xa0\x80\"]") {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if bytes.Count(raw, []byte("["))+bytes.Count(raw, []byte("{")) >= 9000 { // encoding/json's depth limit
			return
		}
		strict, lax := Valid(raw, Strict), Valid(raw, Lax)
		if lax != json.Valid(raw) || strict != (lax && utf8.Valid(raw)) {
			t.Fatalf("strict %v, lax %v, encoding/json %v", strict, lax, json.Valid(raw))
		}
		for _, mode := range []Mode{Strict, Lax} {
			checkMembers(t, raw, mode, mode == Strict && strict || mode == Lax && lax)
		}
		checkElements(t, raw, strict)
		if s, ok := DecodeString(raw); ok != (strict && KindOf(bytes.TrimSpace(raw)) == KindString) {
			t.Fatalf("DecodeString ok %v", ok)
		} else if ok && !bytes.Contains(bytes.ToLower(raw), []byte(`\ud`)) {
			var want string
			if json.Unmarshal(raw, &want) != nil || s != want {
				t.Fatalf("DecodeString = %q, encoding/json %q", s, want)
			}
		}
	})
}

// checkMembers compares Members(raw, mode) with json.Decoder's walk of the object.
func checkMembers(t *testing.T, raw []byte, mode Mode, valid bool) {
	ms, err := Members(raw, mode)
	object := valid && KindOf(bytes.TrimSpace(raw)) == KindObject
	switch {
	case !valid && !errors.Is(err, ErrSyntax), valid && !object && !errors.Is(err, ErrNotObject), object && err != nil:
		t.Fatalf("mode %d: valid %v, object %v, error %v", mode, valid, object, err)
	case err != nil:
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.Token() // '{'
	for i := 0; dec.More(); i++ {
		name, _ := dec.Token()
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil || i >= len(ms) || !bytes.Equal(ms[i].Value, value) {
			t.Fatalf("mode %d member %d: %+v, encoding/json %q (%v)", mode, i, ms, value, err)
		}
		if utf8.Valid(raw) && !bytes.Contains(bytes.ToLower(raw), []byte(`\ud`)) && ms[i].Name != name {
			t.Fatalf("member %d named %q, encoding/json %q", i, ms[i].Name, name)
		}
		if bad := !utf8.Valid(ms[i].Value); bad && !ms[i].BadUTF8 || ms[i].BadUTF8 && (mode == Strict || utf8.Valid(raw)) {
			t.Fatalf("mode %d member %q: BadUTF8 %v", mode, ms[i].Name, ms[i].BadUTF8)
		}
	}
}

// checkElements compares Elements(raw) with json.Decoder's walk of the array.
func checkElements(t *testing.T, raw []byte, strict bool) {
	elems, ok := Elements(raw)
	if ok != (strict && KindOf(bytes.TrimSpace(raw)) == KindArray) {
		t.Fatalf("Elements ok %v", ok)
	}
	if !ok {
		return
	}
	var want []json.RawMessage
	if err := json.Unmarshal(raw, &want); err != nil || len(want) != len(elems) {
		t.Fatalf("%d elements, encoding/json %d (%v)", len(elems), len(want), err)
	}
	for i := range want {
		if !bytes.Equal(elems[i], want[i]) {
			t.Fatalf("element %d: %q, encoding/json %q", i, elems[i], want[i])
		}
	}
}
