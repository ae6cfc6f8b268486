package wireguard

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// ValidMembers and ValidElements agree with Members and Elements on valid
// text: escapes (a quote, a backslash before a quote),
// brackets inside strings, whitespace everywhere, every kind of value.
func TestValidSplittersAgreeWithScanner(t *testing.T) {
	values := []string{
		`{}`, `[]`, ` { } `, `[ ]`,
		`{"a":1,"b":"x","c":null}`,
		"{ \"a\" :\t[1, 2.5e3 ,-0.1] ,\n\"b\\\"}\" : {\"]\":\"[{\"} , \"c\\\\\":\"\\\\\" }",
		`{"a\u0022":"\u005c","":true,"x":false,"x":[[],{},[{"y":[]}]]}`,
		`[1,"two",{"3":[4]},[5,[6]],true,false,null,-7e-8]`,
		"[ \"\\\\\\\"]\" , 0 ,\r\n{} ]",
	}
	for _, v := range values {
		raw := []byte(strings.TrimSpace(v))
		if want, err := Members(raw, Strict); err == nil {
			got, ok := ValidMembers(raw)
			if !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("ValidMembers(%s) = %+v, %v; Members: %+v", v, got, ok, want)
			}
		} else if _, ok := ValidMembers(raw); ok {
			t.Errorf("ValidMembers(%s) accepted a non-object", v)
		}
		want, wantOK := Elements(raw)
		got, ok := ValidElements(raw)
		if ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("ValidElements(%s) = %q, %v; Elements: %q, %v", v, got, ok, want, wantOK)
		}
	}
}

// FuzzValidSplitters: on any text the scanner accepts, the splitters agree
// with it (strings found by their closing quote, escapes and backslash runs
// included). The splitters are given the value as the scanner carves it,
// without the whitespace around it that Members and Elements allow.
func FuzzValidSplitters(f *testing.F) {
	f.Add([]byte(`{"a\\":"\"\\\\\"","b":["\\\\",{"c":"\\\""}]}`))
	f.Add([]byte(`["x\\\\\\\"y", {"\u0022":"\\"}]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		carved := bytes.Trim(raw, " \t\r\n")
		if want, err := Members(raw, Strict); err == nil {
			if got, ok := ValidMembers(carved); !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("ValidMembers(%q) = %+v, %v; Members: %+v", carved, got, ok, want)
			}
		}
		if want, ok := Elements(raw); ok {
			if got, gotOK := ValidElements(carved); !gotOK || !reflect.DeepEqual(got, want) {
				t.Errorf("ValidElements(%q) = %q, %v; Elements: %q", carved, got, gotOK, want)
			}
		}
	})
}
