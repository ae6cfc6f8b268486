package coderun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Binding is one global of the program (docs/protocol.md §3.2): either host
// Functions the client answers, or MCP, the key of an upstream MCP server the
// daemon was configured with, whose tools the daemon calls itself.
type Binding struct {
	Global     string
	Functions  []Function
	ErrorClass *ErrorClass
	MCP        string
}

// ErrorClass asks for a real exception class in the program: a call the host
// rejects raises an instance of Name, with the function's name in the
// attribute MemberNameProperty.
type ErrorClass struct {
	Name               string `json:"name"`
	MemberNameProperty string `json:"memberNameProperty"`
}

// Function is one function of a binding. Build it with Untyped or Typed.
type Function struct {
	name        string
	description string
	parameters  *jsonschema.Schema // nil: untyped
	returns     *jsonschema.Schema
	call        func(ctx context.Context, args json.RawMessage) (any, error)
}

// Untyped is a function whose one argument reaches fn as the program passed
// it (lossless JSON; "null" when called without one). fn's result is
// marshaled with encoding/json; a json.RawMessage passes as it is.
func Untyped(name string, fn func(ctx context.Context, args json.RawMessage) (any, error)) Function {
	return Function{name: name, call: fn}
}

// Typed is a function whose parameters and result have JSON Schemas derived
// from In and Out (github.com/google/jsonschema-go: exported fields by their
// JSON names, required unless omitempty, a `jsonschema:"…"` tag as the
// description). The daemon checks both directions, the program calls it like
// a Python function with keyword arguments, and bindings/describe shows its
// stub. In must be a struct. The arguments are decoded into In with
// encoding/json (integers into integer fields exactly; json.Number for any).
func Typed[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) (Function, error) {
	params, err := jsonschema.For[In](schemaOptions)
	if err != nil {
		return Function{}, fmt.Errorf("coderun: function %q: parameters: %w", name, err)
	}
	if params.Type != "object" {
		return Function{}, fmt.Errorf("coderun: function %q: parameters must be a struct, not %T", name, *new(In))
	}
	returns, err := jsonschema.For[Out](schemaOptions)
	if err != nil {
		return Function{}, fmt.Errorf("coderun: function %q: returns: %w", name, err)
	}
	call := func(ctx context.Context, args json.RawMessage) (any, error) {
		var in In
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if err := dec.Decode(&in); err != nil {
			return nil, &HostError{Type: "TypeError", Message: name + "(): arguments do not fit " + fmt.Sprintf("%T", in) + ": " + err.Error()}
		}
		return fn(ctx, in)
	}
	return Function{name: name, description: description, parameters: params, returns: returns, call: call}, nil
}

// schemaOptions gives the JSON types jsonschema-go would take for their Go
// representation the schemas of the values they hold: a json.RawMessage is
// any JSON value (not an array of bytes), a json.Number a number (not a
// string).
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
	reflect.TypeFor[json.Number]():     {Type: "number"},
}}

// HostError lets a binding function choose the Python exception the program
// receives: Type is one of the built-in types of docs/protocol.md §4.2
// ("KeyError", "ValueError", "TimeoutError", …). Any other error reaches the
// program as RuntimeError (or the binding's ErrorClass) with its text, except
// that errors matching os.ErrNotExist, os.ErrPermission, os.ErrExist and
// context.DeadlineExceeded raise FileNotFoundError, PermissionError,
// FileExistsError and TimeoutError.
type HostError struct {
	Type    string
	Message string
}

func (e *HostError) Error() string { return e.Message }

// pythonType is the built-in exception type err maps to, or "".
func pythonType(err error) string {
	var host *HostError
	switch {
	case errors.As(err, &host):
		return host.Type
	case errors.Is(err, os.ErrNotExist):
		return "FileNotFoundError"
	case errors.Is(err, os.ErrPermission):
		return "PermissionError"
	case errors.Is(err, os.ErrExist):
		return "FileExistsError"
	case errors.Is(err, context.DeadlineExceeded):
		return "TimeoutError"
	}
	return ""
}

// maxResultBytes bounds a binding's result so that its response, envelope
// included, stays within the daemon's message cap (docs/protocol.md §2.1).
const maxResultBytes = protocol.InboundMessageCap - 1024

// bindingDecl is a Binding on the wire.
type bindingDecl struct {
	Global     string      `json:"global"`
	Functions  any         `json:"functions,omitempty"` // []any, empty included; nil for an MCP binding
	ErrorClass *ErrorClass `json:"errorClass,omitempty"`
	MCP        string      `json:"mcp,omitempty"`
}

// typedDecl is a typed function object (§10.1).
type typedDecl struct {
	Name        string             `json:"name"`
	Description string             `json:"description,omitempty"`
	Parameters  *jsonschema.Schema `json:"parameters,omitempty"`
	Returns     *jsonschema.Schema `json:"returns,omitempty"`
}

// declare turns bindings into their wire form and the table the read
// goroutine answers binding/call from. A namespace declared twice is refused
// here; everything else the daemon validates.
func declare(bindings []Binding) ([]bindingDecl, map[string]map[string]Function, error) {
	decls := make([]bindingDecl, 0, len(bindings))
	table := make(map[string]map[string]Function, len(bindings))
	for i, b := range bindings {
		if _, dup := table[b.Global]; dup {
			return nil, nil, fmt.Errorf("coderun: bindings[%d]: global %q is declared twice", i, b.Global)
		}
		d := bindingDecl{Global: b.Global, ErrorClass: b.ErrorClass, MCP: b.MCP}
		fns := make(map[string]Function, len(b.Functions))
		wire := make([]any, 0, len(b.Functions))
		for _, f := range b.Functions {
			fns[f.name] = f
			if f.parameters == nil && f.returns == nil && f.description == "" {
				wire = append(wire, f.name)
			} else {
				wire = append(wire, typedDecl{f.name, f.description, f.parameters, f.returns})
			}
		}
		if b.MCP == "" {
			d.Functions = wire
		}
		table[b.Global] = fns
		decls = append(decls, d)
	}
	return decls, table, nil
}

// answer runs f and returns what the daemon is sent: the result's JSON, or
// the error object the program raises from. Whether the value is lossless
// the daemon decides, on these exact bytes (a result that is not makes the
// program raise "binding resolution must be lossless JSON", docs/protocol.md
// §4.2); here the bytes are only known to be one JSON value, so the answer
// is always a well-formed message.
func answer(ctx context.Context, f Function, args json.RawMessage) (json.RawMessage, *hostRejection) {
	v, err := f.call(ctx, args)
	if err != nil {
		return nil, rejection(err.Error(), pythonType(err))
	}
	raw, isRaw := v.(json.RawMessage)
	if !isRaw {
		if raw, err = json.Marshal(v); err != nil {
			return nil, rejection("binding resolution must be lossless JSON: "+err.Error(), "")
		}
	} else if !json.Valid(raw) {
		return nil, rejection("binding resolution must be lossless JSON: the json.RawMessage is not one JSON value", "")
	}
	if len(raw) > maxResultBytes {
		return nil, rejection(fmt.Sprintf("binding resolution of %d bytes exceeds the daemon's %d-byte message limit", len(raw), protocol.InboundMessageCap), "")
	}
	return raw, nil
}
