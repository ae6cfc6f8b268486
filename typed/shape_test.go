package typed

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestParamsInStubOrder(t *testing.T) {
	f := mustCompile(t, `{"name":"f","parameters":{"type":"object",
		"properties":{"z":{"default":{"b":[1,2.50],"a":null}},"y":{},"max-results":{"default":9007199254740993},
		"b":{},"class":{},"self":{},"a":{"default":"x"}},
		"required":["a","b","ghost"]}}`)
	want := []Param{
		{Name: "b", Required: true},
		{Name: "a", Required: true}, // required: its default is not part of the signature
		{Name: "ghost", Required: true},
		{Name: "z", Default: json.RawMessage(`{"b":[1,2.50],"a":null}`)},
		{Name: "y"},
		{Name: "max-results", Default: json.RawMessage(`9007199254740993`), KeywordOnly: true},
		{Name: "class", KeywordOnly: true},
		{Name: "self", KeywordOnly: true},
	}
	if !reflect.DeepEqual(f.Params, want) {
		t.Fatalf("Params =\n%+v\nwant\n%+v", f.Params, want)
	}
}

func TestParamJSONShape(t *testing.T) {
	b, err := json.Marshal([]Param{{Name: "q", Required: true}, {Name: "max-results", Default: json.RawMessage(`5`), KeywordOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"q","required":true},{"name":"max-results","required":false,"default":5,"keywordOnly":true}]`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}

func TestIsIdentifier(t *testing.T) {
	for name, want := range map[string]bool{
		"q": true, "_x1": true, "Max_Results": true, "match": true, "type": true,
		"": false, "1a": false, "max-results": false, "class": false, "None": false, "self": false, "ñ": false, "a b": false,
	} {
		if got := isIdentifier(name); got != want {
			t.Errorf("isIdentifier(%q) = %v", name, got)
		}
	}
}
