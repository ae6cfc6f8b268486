package coderun

import (
	"context"
	"encoding/json"
	"testing"
)

// C914: Typed's schemas for the types that hold JSON as it is: a
// json.RawMessage is any value (jsonschema-go alone says an array of
// bytes, which the daemon would hold every real result against), a
// json.Number a number.
func TestC914TypedSchemasOfRawJSON(t *testing.T) {
	type in struct {
		V json.RawMessage `json:"v"`
		N json.Number     `json:"n"`
	}
	f, err := Typed("f", "", func(context.Context, in) (json.RawMessage, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(f.parameters)
	returns, _ := json.Marshal(f.returns)
	if string(returns) != "true" && string(returns) != "{}" {
		t.Errorf("returns %s", returns)
	}
	var p struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		t.Fatal(err)
	}
	if v := string(p.Properties["v"]); v != "true" && v != "{}" {
		t.Errorf("v %s", v)
	}
	if n := string(p.Properties["n"]); n != `{"type":"number"}` {
		t.Errorf("n %s", n)
	}
}
