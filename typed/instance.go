package typed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// decodeInstance decodes a value for validation: numbers as json.Number
// (exact), objects as map[string]any. It is iterative — lossless JSON has no
// depth limit, and encoding/json refuses more than 10 000 levels — and,
// unlike json.Decoder.Token, cheap enough for a per-call check. With
// uniqueKeys, a key repeated within one object is an error; without, the
// last one wins.
func decodeInstance(raw []byte, uniqueKeys bool) (any, error) {
	p := &parser{b: raw, uniqueKeys: uniqueKeys}
	var stack []*frame
	for {
		v, open, err := p.value()
		if err != nil {
			return nil, err
		}
		if open != nil {
			stack = append(stack, open)
			continue
		}
		for {
			if len(stack) == 0 {
				return v, p.end()
			}
			top := stack[len(stack)-1]
			closed, err := p.add(top, v)
			if err != nil {
				return nil, err
			}
			if !closed {
				break
			}
			v, stack = top.value(), stack[:len(stack)-1]
		}
	}
}

// frame is an open container.
type frame struct {
	obj  map[string]any // nil for an array
	arr  []any
	key  string              // the member whose value comes next
	keys map[string]struct{} // with uniqueKeys, once a key had escapes: the keys so far as a receiver reads them
}

func (f *frame) value() any {
	if f.obj != nil {
		return f.obj
	}
	return f.arr
}

type parser struct {
	b          []byte
	i          int
	uniqueKeys bool
}

var errEnd = errors.New("not valid JSON: unexpected end")

func (p *parser) syntax(what string) error {
	if p.i >= len(p.b) {
		return errEnd
	}
	return fmt.Errorf("not valid JSON: %s at offset %d", what, p.i)
}

func (p *parser) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// eat consumes c (after whitespace) if it is next.
func (p *parser) eat(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) end() error {
	if p.ws(); p.i != len(p.b) {
		return p.syntax("data after the value")
	}
	return nil
}

// value reads a scalar or an empty container (v), or opens a non-empty
// container (open, with an object's first key read).
func (p *parser) value() (v any, open *frame, err error) {
	switch {
	case p.eat('{'):
		if p.eat('}') {
			return map[string]any{}, nil, nil
		}
		f := &frame{obj: map[string]any{}}
		return nil, f, p.key(f)
	case p.eat('['):
		if p.eat(']') {
			return []any{}, nil, nil
		}
		return nil, &frame{arr: []any{}}, nil
	}
	v, err = p.scalar()
	return v, nil, err
}

func (p *parser) key(f *frame) error {
	p.ws()
	start := p.i
	k, err := p.str()
	if err != nil {
		return err
	}
	if p.uniqueKeys && f.repeats(k, p.b[start:p.i]) {
		return fmt.Errorf("duplicate key %s at offset %d: a key may appear once (the receiver could read another value than the check did)", quoteKey(k), p.i)
	}
	if !p.eat(':') {
		return p.syntax("expected ':'")
	}
	f.key = k
	return nil
}

// repeats reports whether the key k, read from token, is one of f's keys as
// a receiver reads keys: k itself, unless the token has escapes, whose
// decoding here turns every lone surrogate into U+FFFD; then its WTF-8
// decoding, which keeps "\ud800" and "\ud801" apart. An object whose keys
// have no escapes needs no set beside its map.
func (f *frame) repeats(k string, token []byte) bool {
	if f.keys == nil {
		if bytes.IndexByte(token, '\\') < 0 {
			_, seen := f.obj[k]
			return seen
		}
		f.keys = make(map[string]struct{}, len(f.obj)+1)
		for earlier := range f.obj { // read without escapes: as a receiver reads them
			f.keys[earlier] = struct{}{}
		}
	}
	id := k
	if wtf8, ok := wireguard.DecodeString(token); ok {
		id = wtf8
	}
	_, seen := f.keys[id]
	f.keys[id] = struct{}{}
	return seen
}

// quoteKey quotes a key for an error, its first 64 bytes at most.
func quoteKey(k string) string {
	if len(k) > 64 {
		return strconv.Quote(k[:64]) + "…"
	}
	return strconv.Quote(k)
}

// add puts v into f and reads what follows: ',' (and the next key), or the
// closing bracket (closed).
func (p *parser) add(f *frame, v any) (closed bool, err error) {
	closer := byte(']')
	if f.obj != nil {
		f.obj[f.key] = v
		closer = '}'
	} else {
		f.arr = append(f.arr, v)
	}
	switch {
	case p.eat(closer):
		return true, nil
	case !p.eat(','):
		return false, p.syntax("expected ',' or a closing bracket")
	case f.obj != nil:
		return false, p.key(f)
	}
	return false, nil
}

func (p *parser) scalar() (any, error) {
	p.ws()
	if p.i >= len(p.b) {
		return nil, errEnd
	}
	switch c := p.b[p.i]; {
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	for _, lit := range []struct {
		text string
		v    any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if len(p.b)-p.i >= len(lit.text) && string(p.b[p.i:p.i+len(lit.text)]) == lit.text {
			p.i += len(lit.text)
			return lit.v, nil
		}
	}
	return nil, p.syntax("unexpected character")
}

// str reads a string token; escapes are decoded by encoding/json.
func (p *parser) str() (string, error) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", p.syntax("expected a string")
	}
	start, escaped := p.i, false
	for p.i++; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '\\':
			escaped = true
			p.i++
		case c < 0x20:
			return "", p.syntax("control character in string")
		case c == '"':
			p.i++
			return unquote(p.b[start:p.i], escaped)
		}
	}
	return "", errEnd
}

func unquote(tok []byte, escaped bool) (string, error) {
	if !escaped && utf8.Valid(tok) {
		return string(tok[1 : len(tok)-1]), nil
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", syntaxError(err)
	}
	return s, nil
}

// maxNumberDigits bounds a checked number's digits and its exponent's
// magnitude, in values and in schemas alike. The library compares numbers
// as big.Rat, whose parsing costs grow with both (a 1 MB integer takes
// seconds, 1E999999 tens of milliseconds; beyond an exponent of a million
// it fails, and the library then panics), so a hostile number is refused
// before it gets there. 4300 is CPython's own default bound on an
// integer's digits (sys.get_int_max_str_digits): a program could not read a
// larger one.
const maxNumberDigits = 4300

// numberInRange reports whether a number whose mantissa has digits digits
// and whose exponent, sign left out, is the digit string exponent ("" for
// none) is within maxNumberDigits.
func numberInRange[S string | []byte](digits int, exponent S) bool {
	i := 0
	for i < len(exponent) && exponent[i] == '0' { // 1E0001 is 1E1
		i++
	}
	if digits > maxNumberDigits || len(exponent)-i > 9 {
		return false
	}
	e := 0
	for ; i < len(exponent); i++ {
		e = e*10 + int(exponent[i]-'0')
	}
	return e <= maxNumberDigits
}

// tokenInRange is numberInRange of n, a whole JSON number token.
func tokenInRange(n string) bool {
	mantissa, exponent := n, ""
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		mantissa, exponent = n[:i], strings.TrimLeft(n[i+1:], "+-")
	}
	return numberInRange(len(mantissa)-strings.Count(mantissa, "-")-strings.Count(mantissa, "."), exponent)
}

// number reads a number token, checking the JSON grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and, from the counts the
// scan makes, numberInRange.
func (p *parser) number() (json.Number, error) {
	start := p.i
	p.skip("-")
	digits := 1
	if !p.skip("0") {
		if digits = p.digits(); digits == 0 {
			return "", p.syntax("malformed number")
		}
	}
	if p.skip(".") {
		fraction := p.digits()
		if fraction == 0 {
			return "", p.syntax("malformed number")
		}
		digits += fraction
	}
	var exponent []byte
	if p.skip("eE") {
		p.skip("+-")
		from := p.i
		if p.digits() == 0 {
			return "", p.syntax("malformed number")
		}
		exponent = p.b[from:p.i]
	}
	if !numberInRange(digits, exponent) {
		return "", fmt.Errorf("the number at offset %d is too large to check: more than %d digits, or an exponent beyond ±%d",
			start, maxNumberDigits, maxNumberDigits)
	}
	return json.Number(p.b[start:p.i]), nil
}

// skip consumes one byte if it is one of set.
func (p *parser) skip(set string) bool {
	for k := 0; k < len(set) && p.i < len(p.b); k++ {
		if p.b[p.i] == set[k] {
			p.i++
			return true
		}
	}
	return false
}

func (p *parser) digits() int {
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}
