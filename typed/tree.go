package typed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Bounds on one schema. They keep compiling, rendering and validating
// proportional to what a reasonable declaration needs, whatever a host sends.
const (
	MaxSchemaBytes      = 256 << 10 // parameters or returns, as sent
	MaxDescriptionBytes = 16 << 10  // a function's description
	MaxDepth            = 64        // JSON nesting inside one schema
	maxNumberLen        = 64        // digits and signs of one number literal in a schema
)

// object is a JSON object that remembers its members' order, which the
// library's decoded maps lose and the stub order depends on.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// decodeTree decodes one JSON value into an ordered tree (objects as
// *object, numbers as json.Number) and, alongside, the plain tree the
// validator library takes (objects as map[string]any). Nesting deeper than
// MaxDepth and over-long number literals are refused before any recursion
// the input could steer.
func decodeTree(raw []byte) (ordered, plain any, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	ordered, plain, err = decodeValue(dec, 0)
	if err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("trailing data after the schema")
	}
	return ordered, plain, nil
}

func decodeValue(dec *json.Decoder, depth int) (ordered, plain any, err error) {
	if depth > MaxDepth {
		return nil, nil, fmt.Errorf("nested deeper than %d levels", MaxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, syntaxError(err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return decodeObject(dec, depth)
		}
		return decodeArray(dec, depth)
	case json.Number:
		if len(t) > maxNumberLen {
			return nil, nil, fmt.Errorf("number literal longer than %d characters", maxNumberLen)
		}
		if !tokenInRange(string(t)) { // within 64 characters: only the exponent can be out of range
			return nil, nil, fmt.Errorf("number literal %s has an exponent beyond ±%d", t, maxNumberDigits)
		}
	}
	return tok, tok, nil
}

func decodeObject(dec *json.Decoder, depth int) (any, any, error) {
	o := &object{vals: map[string]any{}}
	plain := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, syntaxError(err)
		}
		key := tok.(string) // the decoder only yields string keys inside an object
		if _, dup := o.vals[key]; dup {
			return nil, nil, fmt.Errorf("duplicate member %q", key)
		}
		ov, pv, err := decodeValue(dec, depth+1)
		if err != nil {
			return nil, nil, err
		}
		o.keys = append(o.keys, key)
		o.vals[key], plain[key] = ov, pv
	}
	_, err := dec.Token() // '}'
	return o, plain, syntaxError(err)
}

func decodeArray(dec *json.Decoder, depth int) (any, any, error) {
	ordered, plain := []any{}, []any{}
	for dec.More() {
		ov, pv, err := decodeValue(dec, depth+1)
		if err != nil {
			return nil, nil, err
		}
		ordered, plain = append(ordered, ov), append(plain, pv)
	}
	_, err := dec.Token() // ']'
	return ordered, plain, syntaxError(err)
}

func syntaxError(err error) error {
	if err == nil {
		return nil
	}
	if err == io.EOF {
		return errors.New("not valid JSON: unexpected end")
	}
	return fmt.Errorf("not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}
