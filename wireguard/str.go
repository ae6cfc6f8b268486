package wireguard

import (
	"bytes"
	"unicode/utf8"
)

// A JSON string is processed as a sequence of pieces: either a verbatim span, copied
// to the canonical form unchanged, or a single code point that needs attention
// (escaping, surrogate folding, replacement). The same walkers drive metering,
// encoding and decoding, so the three can never disagree about a string's length.

// hexDigits are the lowercase digits of the \u escapes the canonical form uses.
const hexDigits = "0123456789abcdef"

// shortEscape maps the control characters with a two-byte escape to their letter.
var shortEscape = [0x20]byte{'\b': 'b', '\t': 't', '\n': 'n', '\f': 'f', '\r': 'r'}

// isSurrogate reports whether r is a UTF-16 surrogate code unit.
func isSurrogate(r rune) bool { return r >= 0xD800 && r <= 0xDFFF }

// runeJSONLen is the length of r in the canonical JSON string form (docs/child-protocol-wire.md §2.7): `"` and
// `\` and the short-escaped controls 2, other C0 controls 6 (\u00xx), a surrogate 6
// (\udxxx), anything else its UTF-8 width.
func runeJSONLen(r rune) int {
	switch {
	case r == '"' || r == '\\':
		return 2
	case r < 0x20 && shortEscape[r] != 0:
		return 2
	case r < 0x20 || isSurrogate(r):
		return 6
	}
	return utf8.RuneLen(r)
}

// appendJSONRune appends r in the canonical JSON string form (see runeJSONLen).
func appendJSONRune(dst []byte, r rune) []byte {
	switch {
	case r == '"' || r == '\\':
		return append(dst, '\\', byte(r))
	case r < 0x20 && shortEscape[r] != 0:
		return append(dst, '\\', shortEscape[r])
	case r < 0x20 || isSurrogate(r):
		return append(dst, '\\', 'u',
			hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

// appendWTF8 appends r in generalized UTF-8: a surrogate becomes its 3-byte form,
// which utf8.AppendRune would replace with U+FFFD.
func appendWTF8(dst []byte, r rune) []byte {
	if isSurrogate(r) {
		return append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return utf8.AppendRune(dst, r)
}

// surrogateAt decodes the 3-byte generalized UTF-8 form of a surrogate at s[i:].
func surrogateAt(s string, i int) (rune, bool) {
	if i+2 >= len(s) || s[i] != 0xED || s[i+1] < 0xA0 || s[i+1] > 0xBF || s[i+2]&0xC0 != 0x80 {
		return 0, false
	}
	return 0xD000 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), true
}

// strSafe marks the ASCII bytes that appear raw in a JSON string and in its canonical
// form: everything from 0x20 to 0x7F except `"` and `\`.
var strSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipSafe returns the index of the first byte at or after i that is not strSafe (or
// len(p)): the run every string walker copies or counts without decoding. It is the
// per-byte strSafe loop, eight bytes at a time while a whole word is safe (a word with
// any other byte falls through to that loop, so the result is the loop's).
func skipSafe[T string | []byte](p T, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(p); i += 8 {
		w := p[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		// The high bit of a byte of bad is set when that byte is ≥ 0x80, or (for the first
		// such byte, which is all that matters here) < 0x20, '"' or '\\': the classic
		// has-less-than and has-zero-byte tests, exact as a whole-word yes/no.
		q, b := x^('"'*ones), x^('\\'*ones)
		bad := x | (x-0x20*ones) & ^x | (q-ones) & ^q | (b-ones) & ^b
		if bad&highs != 0 {
			break
		}
	}
	for i < len(p) && p[i] < utf8.RuneSelf && strSafe[p[i]] {
		i++
	}
	return i
}

// nextWTF8Piece returns the piece of the WTF-8 string s that starts at i: a verbatim
// span s[i:next] (span true), or one code point r ending at next. Bytes that are
// neither UTF-8 nor a surrogate form are read as U+FFFD, one per byte, so a caller
// handing in arbitrary bytes still gets valid output of a predictable length.
func nextWTF8Piece(s string, i int) (next int, r rune, span bool) {
	j := i
	for j < len(s) {
		c := s[j]
		if c < utf8.RuneSelf {
			if !strSafe[c] {
				break
			}
			j = skipSafe(s, j+1)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[j:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		j += size
	}
	if j > i {
		return j, 0, true
	}
	if c := s[i]; c < utf8.RuneSelf {
		return i + 1, rune(c), false
	}
	if r, ok := surrogateAt(s, i); ok {
		return i + 3, r, false
	}
	return i + 1, utf8.RuneError, false
}

// AppendString appends s as a canonical JSON string (docs/child-protocol-wire.md §2.7): quotes, `"` `\` and C0
// controls escaped (short forms, else \u00xx lowercase), everything else raw — no
// HTML escaping, U+2028/U+2029 and DEL raw. A WTF-8 surrogate is written as its
// \udxxx escape (each surrogate on its own; a high and a low that happen to be
// adjacent are not folded). A byte that is neither UTF-8 nor a surrogate form is
// written as U+FFFD; DecodeFrame and Capture never produce one.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		next, r, span := nextWTF8Piece(s, i)
		if span {
			dst = append(dst, s[i:next]...)
		} else {
			dst = appendJSONRune(dst, r)
		}
		i = next
	}
	return append(dst, '"')
}

// stringCost is len(AppendString(nil, s)), computed without building it: the ledger
// cost of a log entry before its separator byte (docs/child-protocol-wire.md §2.6.1).
func stringCost(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		next, r, span := nextWTF8Piece(s, i)
		if span {
			n += int64(next - i)
		} else {
			n += int64(runeJSONLen(r))
		}
		i = next
	}
	return n
}

// nextTokenPiece returns the piece of a scanned JSON string token body (the bytes
// between the quotes, already validated by the scanner) that starts at i: a verbatim
// span body[i:next], or the code point of one escape. A high-surrogate escape directly
// followed by a low-surrogate escape folds into the astral code point; any other
// surrogate escape is returned alone (lossless lone surrogate).
func nextTokenPiece(body []byte, i int) (next int, r rune, span bool) {
	if body[i] != '\\' {
		k := bytes.IndexByte(body[i:], '\\')
		if k < 0 {
			return len(body), 0, true
		}
		return i + k, 0, true
	}
	if body[i+1] != 'u' {
		return i + 2, rune(unescapeLetter[body[i+1]]), false
	}
	r = hex4(body[i+2:])
	if r >= 0xD800 && r <= 0xDBFF && i+12 <= len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
		if lo := hex4(body[i+8:]); lo >= 0xDC00 && lo <= 0xDFFF {
			return i + 12, 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), false
		}
	}
	return i + 6, r, false
}

// unescapeLetter maps the letter after a backslash to the character it stands for.
var unescapeLetter = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 decodes four hex digits the scanner has already validated.
func hex4(p []byte) rune {
	var r rune
	for _, c := range p[:4] {
		r <<= 4
		switch {
		case c <= '9':
			r |= rune(c - '0')
		case c >= 'a':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// tokenStringLen is the canonical JSON length, quotes included, of a string token.
func tokenStringLen(tok []byte) int64 {
	body := tok[1 : len(tok)-1]
	n := int64(2)
	for i := 0; i < len(body); {
		next, r, span := nextTokenPiece(body, i)
		if span {
			n += int64(next - i)
		} else {
			n += int64(runeJSONLen(r))
		}
		i = next
	}
	return n
}

// appendTokenString appends the canonical form of a string token.
func appendTokenString(dst, tok []byte) []byte {
	body := tok[1 : len(tok)-1]
	dst = append(dst, '"')
	for i := 0; i < len(body); {
		next, r, span := nextTokenPiece(body, i)
		if span {
			dst = append(dst, body[i:next]...)
		} else {
			dst = appendJSONRune(dst, r)
		}
		i = next
	}
	return append(dst, '"')
}

// decodeTokenString decodes a string token to a WTF-8 Go string.
func decodeTokenString(tok []byte) string {
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body)
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		next, r, span := nextTokenPiece(body, i)
		if span {
			out = append(out, body[i:next]...)
		} else {
			out = appendWTF8(out, r)
		}
		i = next
	}
	return string(out)
}
