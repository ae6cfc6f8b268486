package wireguard

import (
	"bytes"
	"unicode/utf8"
)

// The scanner is a strict RFC 8259 tokenizer over one JSON text, the only one in the
// daemon: the fd-3 frames, the values they carry and the client's JSON-RPC messages
// all go through it. It is iterative — the open containers live on a byte stack, so
// nesting depth costs one byte per level — and strict: raw control characters in
// strings, invalid or overlong UTF-8, encoded surrogates (ED A0 80), bad escapes,
// leading zeros, trailing garbage all fail. The one relaxation is Lax mode, for
// invalid UTF-8 inside strings only (see Mode). It validates syntax only; numbers and
// strings are judged by their consumers.

// Mode is how a scan treats invalid UTF-8 inside a string. Outside strings every mode
// is strict: any byte ≥ 0x80 there is a syntax error.
type Mode uint8

const (
	// Strict fails the scan on invalid UTF-8 anywhere: the rule for the child's frames
	// and for every value the daemon passes on (docs/child-protocol-wire.md §2.4 step 3).
	Strict Mode = iota
	// Lax accepts invalid UTF-8 inside a string and reports it (Member.BadUTF8) instead
	// of failing. The daemon scans a client's message this way so that it can answer
	// "not valid UTF-8" apart from "not valid JSON", and so that a binding's result
	// with invalid UTF-8 still answers its call — as a lossy result, judged later by
	// CheckClientResult (docs/child-protocol-wire.md §2.9) — instead of being refused as a malformed message.
	Lax
)

type tokKind uint8

const (
	tokEOF tokKind = iota // the text ended after one complete value
	tokBeginObject
	tokEndObject
	tokBeginArray
	tokEndArray
	tokString
	tokNumber
	tokLiteral // true, false or null: its canonical form is its raw text
)

// token is one scanned token; src[start:end] is its raw text (strings with quotes).
type token struct {
	kind       tokKind
	start, end int
	sep        byte // ',' or ':' that precedes it in the compact form; 0 if none
	integer    bool // number without fraction or exponent
}

// Container states, one per open container on the stack.
const (
	stArrayFirst  = iota // after '[': a value or ']'
	stArrayNext          // after an element: ',' or ']'
	stObjectFirst        // after '{': a name or '}'
	stObjectColon        // after a name: ':' then a value
	stObjectNext         // after a member: ',' or '}'
)

type scanner struct {
	src   []byte
	pos   int
	stack []byte
	done  bool // the top-level value is complete
	lax   bool // Lax mode: invalid UTF-8 in a string sets bad instead of failing
	bad   bool // a string scanned since bad was last cleared held invalid UTF-8
}

func newScanner(src []byte, mode Mode) scanner { return scanner{src: src, lax: mode == Lax} }

// depth is the number of open containers.
func (s *scanner) depth() int { return len(s.stack) }

// next returns the next token; ok is false on any syntax error (the scanner is then
// unusable). After the last token it returns tokEOF.
func (s *scanner) next() (t token, ok bool) {
	s.skipSpace()
	if len(s.stack) == 0 {
		if s.done {
			return token{kind: tokEOF, start: s.pos, end: s.pos}, s.pos == len(s.src)
		}
		return s.value(0)
	}
	top := len(s.stack) - 1
	switch st, c := s.stack[top], s.peek(); {
	case st == stObjectColon:
		if c != ':' {
			return token{}, false
		}
		s.pos++
		s.skipSpace()
		s.stack[top] = stObjectNext
		return s.value(':')
	case c == ']' && (st == stArrayFirst || st == stArrayNext):
		return s.close(tokEndArray), true
	case c == '}' && (st == stObjectFirst || st == stObjectNext):
		return s.close(tokEndObject), true
	case st == stArrayFirst:
		s.stack[top] = stArrayNext
		return s.value(0)
	case st == stObjectFirst:
		s.stack[top] = stObjectColon
		return s.name(0)
	case c != ',':
		return token{}, false
	}
	s.pos++ // the ',' after an element or a member
	s.skipSpace()
	if s.stack[top] == stArrayNext {
		return s.value(',')
	}
	s.stack[top] = stObjectColon
	return s.name(',')
}

// atEOF consumes what follows a complete value and reports whether it was only
// whitespace.
func (s *scanner) atEOF() bool {
	t, ok := s.next()
	return ok && t.kind == tokEOF
}

func (s *scanner) peek() byte {
	if s.pos < len(s.src) {
		return s.src[s.pos]
	}
	return 0
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) close(k tokKind) token {
	t := token{kind: k, start: s.pos, end: s.pos + 1}
	s.pos++
	s.stack = s.stack[:len(s.stack)-1]
	s.done = len(s.stack) == 0
	return t
}

// name scans an object member name at s.pos.
func (s *scanner) name(sep byte) (token, bool) {
	if s.peek() != '"' {
		return token{}, false
	}
	return s.str(sep)
}

// value scans the first token of a value at s.pos.
func (s *scanner) value(sep byte) (token, bool) {
	start := s.pos
	switch c := s.peek(); {
	case c == '{' || c == '[':
		st, k := byte(stObjectFirst), tokBeginObject
		if c == '[' {
			st, k = stArrayFirst, tokBeginArray
		}
		s.pos++
		s.stack = append(s.stack, st)
		return token{kind: k, start: start, end: s.pos, sep: sep}, true
	case c == '"':
		return s.scalar(s.str(sep))
	case c == '-' || c >= '0' && c <= '9':
		return s.scalar(s.number(sep))
	case c == 't':
		return s.scalar(s.literal(sep, "true"))
	case c == 'f':
		return s.scalar(s.literal(sep, "false"))
	case c == 'n':
		return s.scalar(s.literal(sep, "null"))
	}
	return token{}, false
}

// scalar marks the text complete when a scalar was the top-level value.
func (s *scanner) scalar(t token, ok bool) (token, bool) {
	if ok && len(s.stack) == 0 {
		s.done = true
	}
	return t, ok
}

func (s *scanner) literal(sep byte, word string) (token, bool) {
	if !bytes.HasPrefix(s.src[s.pos:], []byte(word)) {
		return token{}, false
	}
	t := token{kind: tokLiteral, start: s.pos, end: s.pos + len(word), sep: sep}
	s.pos = t.end
	return t, true
}

// str scans a string token starting at its opening quote.
func (s *scanner) str(sep byte) (token, bool) {
	start := s.pos
	i := s.pos + 1
	for i < len(s.src) {
		c := s.src[i]
		switch {
		case c < utf8.RuneSelf && strSafe[c]:
			i = skipSafe(s.src, i+1)
		case c == '"':
			s.pos = i + 1
			return token{kind: tokString, start: start, end: s.pos, sep: sep}, true
		case c == '\\':
			n := escapeLen(s.src[i:])
			if n == 0 {
				return token{}, false
			}
			i += n
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(s.src[i:])
			if r == utf8.RuneError && size == 1 {
				if !s.lax {
					return token{}, false
				}
				s.bad = true
			}
			i += size
		default: // raw control character
			return token{}, false
		}
	}
	return token{}, false
}

// escapeLen is the length of the escape at the start of p, or 0 if it is invalid.
func escapeLen(p []byte) int {
	if len(p) < 2 {
		return 0
	}
	switch p[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(p) < 6 {
			return 0
		}
		for _, c := range p[2:6] {
			if !isHex(c) {
				return 0
			}
		}
		return 6
	}
	return 0
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number(sep byte) (token, bool) {
	start, i := s.pos, s.pos
	if s.src[i] == '-' {
		i++
	}
	switch {
	case i < len(s.src) && s.src[i] == '0':
		i++
	case i < len(s.src) && s.src[i] >= '1' && s.src[i] <= '9':
		i = s.digits(i)
	default:
		return token{}, false
	}
	integer := true
	if i < len(s.src) && s.src[i] == '.' {
		integer = false
		if i = s.digits(i + 1); s.src[i-1] == '.' {
			return token{}, false
		}
	}
	if i < len(s.src) && (s.src[i] == 'e' || s.src[i] == 'E') {
		integer = false
		i++
		if i < len(s.src) && (s.src[i] == '+' || s.src[i] == '-') {
			i++
		}
		j := s.digits(i)
		if j == i {
			return token{}, false
		}
		i = j
	}
	s.pos = i
	return token{kind: tokNumber, start: start, end: i, sep: sep, integer: integer}, true
}

// digits returns the index after the run of decimal digits starting at i.
func (s *scanner) digits(i int) int {
	for i < len(s.src) && s.src[i] >= '0' && s.src[i] <= '9' {
		i++
	}
	return i
}
