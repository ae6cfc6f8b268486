package rpc

import (
	"errors"
	"unicode/utf8"
)

// A strict, iterative JSON scanner for inbound messages (Appendix B items 4,
// 5): no depth limit, no float conversion, raw bytes carved out as they were
// sent. encoding/json is never used on client input.

var errSyntax = errors.New("invalid JSON")

// scanResult records where invalid UTF-8 was seen while scanning leniently.
type scanResult struct {
	end     int
	badUTF8 bool
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanValue scans one JSON value starting at b[i] (no leading whitespace
// allowed) and returns the index just past it. With lax, invalid UTF-8 inside
// strings is accepted and reported; otherwise it is a syntax error.
func scanValue(b []byte, i int, lax bool) (scanResult, error) {
	var stack []byte // '{' or '['
	bad := false
	for {
		// A value is expected at b[i].
		if i >= len(b) {
			return scanResult{}, errSyntax
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			j := skipSpace(b, i+1)
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			if j < len(b) && b[j] == closer {
				i = j + 1
				break
			}
			stack = append(stack, c)
			i = j
			if c == '{' {
				var err error
				if i, err = scanKey(b, i, lax, &bad); err != nil {
					return scanResult{}, err
				}
			}
			continue
		case c == '"':
			end, sbad, err := scanString(b, i, lax)
			if err != nil {
				return scanResult{}, err
			}
			bad = bad || sbad
			i = end
		case c == 't':
			if !hasLit(b, i, "true") {
				return scanResult{}, errSyntax
			}
			i += 4
		case c == 'f':
			if !hasLit(b, i, "false") {
				return scanResult{}, errSyntax
			}
			i += 5
		case c == 'n':
			if !hasLit(b, i, "null") {
				return scanResult{}, errSyntax
			}
			i += 4
		default:
			end, ok := scanNumber(b, i)
			if !ok {
				return scanResult{}, errSyntax
			}
			i = end
		}
		// After a complete value: close containers or move to the next one.
		for {
			if len(stack) == 0 {
				return scanResult{end: i, badUTF8: bad}, nil
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return scanResult{}, errSyntax
			}
			top := stack[len(stack)-1]
			if (top == '{' && b[i] == '}') || (top == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return scanResult{}, errSyntax
			}
			i = skipSpace(b, i+1)
			if top == '{' {
				var err error
				if i, err = scanKey(b, i, lax, &bad); err != nil {
					return scanResult{}, err
				}
			}
			break
		}
	}
}

// scanKey scans `"name" :` and the whitespace after it.
func scanKey(b []byte, i int, lax bool, bad *bool) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, errSyntax
	}
	end, sbad, err := scanString(b, i, lax)
	if err != nil {
		return 0, err
	}
	*bad = *bad || sbad
	i = skipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		return 0, errSyntax
	}
	return skipSpace(b, i+1), nil
}

func hasLit(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber scans the JSON number grammar.
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}

func isHex(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }

// scanString scans a JSON string starting at its opening quote.
func scanString(b []byte, i int, lax bool) (end int, bad bool, err error) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, bad, nil
		case c == '\\':
			if i+1 >= len(b) {
				return 0, false, errSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return 0, false, errSyntax
				}
				i += 6
			default:
				return 0, false, errSyntax
			}
		case c < 0x20:
			return 0, false, errSyntax
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				if !lax {
					return 0, false, errSyntax
				}
				bad = true
			}
			i += n
		}
	}
	return 0, false, errSyntax
}

// member is one object member: the decoded name and the raw value.
type member struct {
	name string
	raw  []byte
	bad  bool // invalid UTF-8 inside the value (lax scans only)
}

// objectMembers splits a syntactically valid object into its members, in
// order (duplicates kept). ok is false when raw is not an object.
func objectMembers(raw []byte, lax bool) ([]member, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	i = skipSpace(raw, i+1)
	var out []member
	if i < len(raw) && raw[i] == '}' {
		return out, true
	}
	for {
		kend, kbad, err := scanString(raw, i, lax)
		if err != nil || kbad {
			return nil, false
		}
		name, _ := decodeString(raw[i:kend])
		i = skipSpace(raw, kend)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = skipSpace(raw, i+1)
		r, err := scanValue(raw, i, lax)
		if err != nil {
			return nil, false
		}
		out = append(out, member{name: name, raw: raw[i:r.end], bad: r.badUTF8})
		i = skipSpace(raw, r.end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
			continue
		}
		if i < len(raw) && raw[i] == '}' {
			return out, true
		}
		return nil, false
	}
}

// arrayElements splits a syntactically valid array into raw elements.
func arrayElements(raw []byte) ([][]byte, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	i = skipSpace(raw, i+1)
	out := [][]byte{}
	if i < len(raw) && raw[i] == ']' {
		return out, true
	}
	for {
		r, err := scanValue(raw, i, true)
		if err != nil {
			return nil, false
		}
		out = append(out, raw[i:r.end])
		i = skipSpace(raw, r.end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
			continue
		}
		if i < len(raw) && raw[i] == ']' {
			return out, true
		}
		return nil, false
	}
}

// lookup returns the last member called name (JSON.parse semantics).
func lookup(ms []member, name string) (member, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].name == name {
			return ms[i], true
		}
	}
	return member{}, false
}

// decodeString decodes a raw JSON string token into a WTF-8 Go string: a
// lone surrogate escape becomes its 3-byte generalized UTF-8 form, a
// surrogate pair folds to the astral character. ok is false for non-strings.
func decodeString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", false
		}
		switch s[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+6 > len(s) {
				return "", false
			}
			r := hex4(s[i+2 : i+6])
			i += 6
			if r >= 0xD800 && r < 0xDC00 && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if lo := hex4(s[i+2 : i+6]); lo >= 0xDC00 && lo < 0xE000 {
					out = utf8.AppendRune(out, 0x10000+(r-0xD800)<<10+(lo-0xDC00))
					i += 6
					continue
				}
			}
			out = appendWTF8(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, s[i+1])
		}
		i += 2
	}
	return string(out), true
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case isDigit(c):
			r |= rune(c - '0')
		default:
			r |= rune(c|0x20-'a') + 10
		}
	}
	return r
}

// appendWTF8 appends r, writing a surrogate as generalized UTF-8.
func appendWTF8(dst []byte, r rune) []byte {
	if r >= 0xD800 && r < 0xE000 {
		return append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return utf8.AppendRune(dst, r)
}

// jsonKind names the kind of a raw JSON value by its first byte.
func jsonKind(raw []byte) byte {
	if len(raw) == 0 {
		return 0
	}
	switch c := raw[0]; c {
	case '{', '[', '"', 't', 'f', 'n':
		return c
	default:
		return '0'
	}
}
