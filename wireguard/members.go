package wireguard

import "errors"

// The scanner's entry points for whole values: splitting an object into members or
// an array into elements, checking a text, decoding a string. Child frames (frame.go)
// and client messages (package rpc) both go through walkObject; they differ only in
// Mode and in the policy they apply to the members they are shown.

// Errors of Members.
var (
	ErrSyntax    = errors.New("wireguard: not exactly one JSON value")
	ErrNotObject = errors.New("wireguard: the JSON value is not an object")
)

// errStopped ends a walk whose visitor refused a member.
var errStopped = errors.New("wireguard: member refused")

// Member is one member of a JSON object, as Members returns it.
type Member struct {
	Name    string // decoded to WTF-8: a lone surrogate escape is kept (docs/child-protocol-wire.md §2.7)
	Value   []byte // the value's raw text exactly as sent, aliasing the scanned input
	BadUTF8 bool   // Lax only: the name or the value holds invalid UTF-8 inside a string
}

// Members splits raw — exactly one JSON object, whitespace around it allowed — into its
// members, in order, a repeated name kept each time (Last picks JSON.parse's choice).
// Only the names are decoded; values stay raw text and may nest to any depth. It
// allocates the member slice, the names and one byte per open container, nothing
// else proportional to the values. The error is ErrSyntax when raw is not exactly one
// JSON value under mode, ErrNotObject when it is one but not an object.
func Members(raw []byte, mode Mode) ([]Member, error) {
	var out []Member
	s := newScanner(raw, mode)
	err := walkObject(&s, false, func(m rawMember) bool {
		out = append(out, Member{Name: decodeTokenString(m.name), Value: m.value, BadUTF8: m.bad})
		return true
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []Member{}
	}
	return out, nil
}

// Last returns the last member called name: the one JSON.parse, Python's json and
// encoding/json keep when a name repeats.
func Last(ms []Member, name string) (Member, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Name == name {
			return ms[i], true
		}
	}
	return Member{}, false
}

// Elements splits raw — exactly one JSON array in strict UTF-8, whitespace around it
// allowed — into the raw text of its elements, in order. ok is false for anything
// else.
func Elements(raw []byte) (elems [][]byte, ok bool) {
	s := newScanner(raw, Strict)
	if t, ok := s.next(); !ok || t.kind != tokBeginArray {
		return nil, false
	}
	elems = [][]byte{}
	for {
		t, ok := s.next()
		if !ok {
			return nil, false
		}
		if t.kind == tokEndArray {
			return elems, s.atEOF()
		}
		end, ok := skipValue(&s, t, false)
		if !ok {
			return nil, false
		}
		elems = append(elems, raw[t.start:end])
	}
}

// Valid reports whether raw is exactly one JSON value, whitespace around it allowed,
// under mode.
func Valid(raw []byte, mode Mode) bool {
	s := newScanner(raw, mode)
	for {
		t, ok := s.next()
		if !ok || t.kind == tokEOF {
			return ok
		}
	}
}

// DecodeString decodes raw — exactly one JSON string in strict UTF-8 — to a WTF-8 Go
// string: escapes resolved, a surrogate pair folded to its character, a lone
// surrogate escape kept as its 3-byte generalized UTF-8 form (docs/child-protocol-wire.md §2.7). ok is false for
// anything else.
func DecodeString(raw []byte) (string, bool) {
	s := newScanner(raw, Strict)
	t, ok := s.next()
	if !ok || t.kind != tokString || !s.atEOF() {
		return "", false
	}
	return decodeTokenString(raw[t.start:t.end]), true
}

// Kind is the kind of a JSON value, named by the byte it starts with.
type Kind byte

const (
	KindNone   Kind = 0 // no value: nil or empty text
	KindObject Kind = '{'
	KindArray  Kind = '['
	KindString Kind = '"'
	KindNumber Kind = '0'
	KindTrue   Kind = 't'
	KindFalse  Kind = 'f'
	KindNull   Kind = 'n'
)

// KindOf names the kind of raw, a value Members or Elements returned, by its first
// byte; it does not look further (the scan that carved raw out validated it).
func KindOf(raw []byte) Kind {
	if len(raw) == 0 {
		return KindNone
	}
	switch c := Kind(raw[0]); c {
	case KindObject, KindArray, KindString, KindTrue, KindFalse, KindNull:
		return c
	}
	return KindNumber
}

// rawMember is one object member as walkObject shows it.
type rawMember struct {
	name  []byte  // the name token, quotes included
	kind  tokKind // the value's first token (tokEOF, the zero value, for "absent")
	value []byte  // the value's raw text
	bad   bool    // Lax: the name or the value held invalid UTF-8
}

// walkObject scans s's text, which must be exactly one JSON object, and shows visit
// each member in order; visit returning false stops the walk with errStopped. A valid
// value that is not an object is ErrNotObject; a syntax error anywhere, ErrSyntax.
// With exactInts, an integer token a double cannot hold exactly, anywhere in the
// text, is a syntax error too (docs/child-protocol-wire.md §2.4 step 3.2).
func walkObject(s *scanner, exactInts bool, visit func(rawMember) bool) error {
	t, ok := s.next()
	if !ok {
		return ErrSyntax
	}
	if t.kind != tokBeginObject {
		if _, ok := skipValue(s, t, exactInts); !ok || !s.atEOF() {
			return ErrSyntax
		}
		return ErrNotObject
	}
	for {
		s.bad = false
		name, ok := s.next()
		if !ok {
			return ErrSyntax
		}
		if name.kind == tokEndObject {
			if !s.atEOF() {
				return ErrSyntax
			}
			return nil
		}
		t, ok := s.next()
		if !ok {
			return ErrSyntax
		}
		end, ok := skipValue(s, t, exactInts)
		if !ok {
			return ErrSyntax
		}
		m := rawMember{name: s.src[name.start:name.end], kind: t.kind, value: s.src[t.start:end], bad: s.bad}
		if !visit(m) {
			return errStopped
		}
	}
}

// skipValue consumes the rest of the value whose first token is t, returning the end
// offset of its last token; it fails on bad syntax and, with exactInts, on an unsafe
// integer token.
func skipValue(s *scanner, t token, exactInts bool) (end int, ok bool) {
	d := s.depth()
	if t.kind == tokBeginObject || t.kind == tokBeginArray {
		d--
	}
	for {
		if exactInts && t.kind == tokNumber && t.integer && unsafeInteger(s.src[t.start:t.end]) {
			return 0, false
		}
		if s.depth() <= d {
			return t.end, true
		}
		if t, ok = s.next(); !ok {
			return 0, false
		}
	}
}
