package typed

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// decodeInstance decodes a value for validation: numbers as json.Number
// (exact), objects as map[string]any, iteratively, so a value nested
// 100 000 deep (lossless JSON has no depth limit) decodes like any other;
// encoding/json's Unmarshal would refuse it past 10 000 levels.
func decodeInstance(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var root any
	var stack []*frame
	done := false // a whole value has been read
	for {
		tok, err := dec.Token()
		switch {
		case err == io.EOF && done:
			return root, nil
		case err == io.EOF:
			return nil, errors.New("not valid JSON: unexpected end")
		case err != nil:
			return nil, syntaxError(err)
		case done:
			return nil, errors.New("not valid JSON: more than one value")
		}
		stack, root = applyToken(stack, tok, root)
		done = len(stack) == 0
	}
}

// applyToken applies one token: opens or closes a container, records a key, or
// places a scalar.
func applyToken(stack []*frame, tok json.Token, root any) ([]*frame, any) {
	if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
		closed := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		return stack, place(stack, closed.value(), root)
	}
	if len(stack) > 0 && stack[len(stack)-1].wantsKey() {
		stack[len(stack)-1].key = tok.(string)
		return stack, root
	}
	switch tok {
	case json.Delim('{'):
		return append(stack, &frame{obj: map[string]any{}, isObj: true}), root
	case json.Delim('['):
		return append(stack, &frame{arr: []any{}}), root
	}
	return stack, place(stack, tok, root)
}

// frame is an open container.
type frame struct {
	isObj  bool
	obj    map[string]any
	arr    []any
	key    string
	hasKey bool
}

func (f *frame) wantsKey() bool {
	if !f.isObj || f.hasKey {
		return false
	}
	f.hasKey = true
	return true
}

func (f *frame) value() any {
	if f.isObj {
		return f.obj
	}
	return f.arr
}

// place puts a finished value into the innermost open container, or makes
// it the root when none is open.
func place(stack []*frame, v, root any) any {
	if len(stack) == 0 {
		return v
	}
	top := stack[len(stack)-1]
	if top.isObj {
		top.obj[top.key] = v
		top.hasKey = false
	} else {
		top.arr = append(top.arr, v)
	}
	return root
}
