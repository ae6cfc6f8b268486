package main

import (
	"encoding/json"
	"fmt"
	"time"
)

// Typed bindings (docs/protocol-typed.md §10): what declaring schemas costs a run, a call and
// bindings/describe.

// typedEcho is tools.echo(i: int) -> {"i": int}, checked both ways; the
// untyped rows call the same host function with the same args object.
var typedEcho = map[string]any{"name": "echo",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"i": map[string]any{"type": "integer"}},
		"required": []string{"i"}, "additionalProperties": false},
	"returns": map[string]any{"type": "object", "properties": map[string]any{"i": map[string]any{"type": "integer"}},
		"required": []string{"i"}}}

func toolsBinding(functions ...any) map[string]any {
	return map[string]any{"bindings": []map[string]any{{"global": "tools", "functions": functions}}}
}

// typedBindingRows times the sequential binding loop with an untyped and a
// typed echo, alternating in one daemon, per call minus a paired return 1;
// the untyped figure is the typed row's floor, so its ratio is typed/untyped.
func typedBindingRows(o options, d *daemon) ([]row, error) {
	n, rounds := 1000, 5
	if o.quick {
		n, rounds = 20, 1
	}
	seq := fmt.Sprintf("for i in range(%d):\n    await tools.echo(i=i)\nreturn 1", n)
	untyped, typed := toolsBinding("echo"), toolsBinding(typedEcho)
	var plain, checked samples
	for range rounds {
		b, err := pacedRun(d, "return 1", nil)
		if err != nil {
			return nil, err
		}
		u, err := pacedRun(d, seq, untyped)
		if err != nil {
			return nil, err
		}
		t, err := pacedRun(d, seq, typed)
		if err != nil {
			return nil, err
		}
		plain = append(plain, (u-b)/time.Duration(n))
		checked = append(checked, (t-b)/time.Duration(n))
	}
	return []row{
		newRow(fmt.Sprintf("untyped sequential binding round trip (%d calls)", n), "µs", 0, us(plain.pct(50)), ""),
		newRow(fmt.Sprintf("typed sequential binding round trip (%d calls)", n), "µs", us(plain.pct(50)), us(checked.pct(50)),
			"floor = the untyped row; target ratio ≤ 1.15"),
	}, nil
}

// fiftyTyped declares 50 functions whose schemas nest objects, arrays,
// enums and unions, each distinct (so each is compiled once, then cached).
func fiftyTyped() []any {
	fns := make([]any, 50)
	for i := range fns {
		obj := func(props map[string]any, required ...string) map[string]any {
			return map[string]any{"type": "object", "properties": props, "required": append([]string{}, required...)}
		}
		filter := obj(map[string]any{
			"tags":  map[string]any{"type": "array", "items": map[string]any{"enum": []string{"a", "b", "c"}}},
			"range": obj(map[string]any{"from": map[string]any{"type": "integer"}, "to": map[string]any{"type": "integer"}}, "from"),
			"owner": map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "null"}}},
		})
		fns[i] = map[string]any{"name": fmt.Sprintf("tool_%d", i), "description": fmt.Sprintf("Tool number %d.", i),
			"parameters": obj(map[string]any{
				"q":      map[string]any{"type": "string", "description": "the query"},
				"filter": filter,
				"limit":  map[string]any{"type": "integer", "minimum": 1, "default": i + 1},
			}, "q"),
			"returns": map[string]any{"type": "array", "items": obj(map[string]any{
				"id": map[string]any{"type": "integer"}, "title": map[string]any{"type": "string"}}, "id")},
		}
	}
	return fns
}

// describeRow times bindings/describe of fiftyTyped, request to response
// (the params encoded once, outside the timing).
func describeRow(o options, d *daemon) (row, error) {
	raw, err := json.Marshal(toolsBinding(fiftyTyped()...))
	params := json.RawMessage(raw)
	if err != nil {
		return row{}, err
	}
	if _, err := call(d.conn, "bindings/describe", params); err != nil { // compiles and caches
		return row{}, err
	}
	s, err := timeN(o.samples, func() error { _, err := call(d.conn, "bindings/describe", params); return err })
	if err != nil {
		return row{}, err
	}
	return newRow("bindings/describe, 50 functions with nested schemas, p50", "ms", 0, ms(s.pct(50)),
		"request to response; target ≤ 5 ms"), nil
}

// typedDeclareRow is what declaring fiftyTyped adds to return 1: paced runs
// with and without the declarations, alternating, difference of medians.
func typedDeclareRow(o options, d *daemon) (row, error) {
	n := 20
	if o.quick {
		n = 2
	}
	typed := toolsBinding(fiftyTyped()...)
	var plain, declared samples
	for range n {
		p, err := pacedRun(d, "return 1", nil)
		if err != nil {
			return row{}, err
		}
		t, err := pacedRun(d, "return 1", typed)
		if err != nil {
			return row{}, err
		}
		plain, declared = append(plain, p), append(declared, t)
	}
	return newRow("return 1 declaring 50 typed functions minus plain return 1", "ms", 0,
		ms(declared.pct(50)-plain.pct(50)), "paced runs, medians; target ≤ 0.5 ms"), nil
}
