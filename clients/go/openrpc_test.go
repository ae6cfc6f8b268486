package coderun_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	coderun "github.com/coderun-rpc/coderun-rpc/clients/go"
)

// jsonNames are the member names t's exported fields encode as.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestResultTypesMatchOpenRPC: the client's result types have exactly the
// members docs/openrpc.json documents (the document is generated from the
// tables the daemon answers with), so a member the daemon adds is not lost.
func TestResultTypesMatchOpenRPC(t *testing.T) {
	raw, err := os.ReadFile("../../docs/openrpc.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for schema, v := range map[string]any{"RunResult": coderun.Result{}, "Stats": coderun.Stats{},
		"RunError": coderun.RunError{}, "SessionInfo": coderun.SessionInfo{}, "OutFile": coderun.OutFile{}} {
		var want []string
		for name := range doc.Components.Schemas[schema].Properties {
			want = append(want, name)
		}
		slices.Sort(want)
		if got := jsonNames(reflect.TypeOf(v)); !slices.Equal(got, want) {
			t.Errorf("%s: the client has %v, the document %v", schema, got, want)
		}
	}
}
