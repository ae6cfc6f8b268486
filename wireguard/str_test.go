package wireguard

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// docs/child-protocol-wire.md §2.7 string rules; stringCost is always the encoded length.
func TestAppendString(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{"", `""`},
		{"plain", `"plain"`},
		{"a\"b\\", `"a\"b\\"`},
		{"\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"\x00\x1f", `"\u0000\u001f"`},
		{"\x7f<>&\u2028\u2029", "\"\x7f<>&\u2028\u2029\""},
		{"é中😀", `"é中😀"`},
		{"\xed\xa0\x80", `"\ud800"`},
		{"\xed\xbf\xbf", `"\udfff"`},
		{"x\xed\xa0\x80\xed\xb0\x80", `"x\ud800\udc00"`},
		{"\xff", "\"\uFFFD\""},
		{"\xed\xa0", "\"\uFFFD\uFFFD\""},
		{"\uFFFD", "\"\uFFFD\""},
	} {
		got := string(AppendString([]byte("<"), c.in))
		if got != "<"+c.want {
			t.Errorf("AppendString(%q) = %s, want %s", c.in, got[1:], c.want)
		}
		if n := stringCost(c.in); n != int64(len(c.want)) {
			t.Errorf("stringCost(%q) = %d, want %d", c.in, n, len(c.want))
		}
	}
}

func TestDecodeTokenString(t *testing.T) {
	for _, c := range []struct {
		tok, want string
	}{
		{`"abc"`, "abc"},
		{`"\u0061\/\n"`, "a/\n"},
		{`"\ud800"`, "\xed\xa0\x80"},
		{`"\ud83d\ude00"`, "😀"},
		{`"\ude00\ud83d"`, "\xed\xb8\x80\xed\xa0\xbd"},
		{`"\ud83d"`, "\xed\xa0\xbd"},
		{`"\ud83dx\ude00"`, "\xed\xa0\xbdx\xed\xb8\x80"},
	} {
		if got := decodeTokenString([]byte(c.tok)); got != c.want {
			t.Errorf("decode %s = %q, want %q", c.tok, got, c.want)
		}
		// A decoded string re-encodes to its canonical token.
		canon, _ := CheckValue([]byte(c.tok), noBudget)
		if enc := AppendString(nil, c.want); string(enc) != string(canon) {
			t.Errorf("%s: AppendString %s != canonical %s", c.tok, enc, canon)
		}
	}
	if got := cutChars("a\xed\xa0\x80"+strings.Repeat("b", 5), 2); got != "a\xed\xa0\x80" {
		t.Errorf("cutChars = %q", got)
	}
}

// safeByte is strSafe spelled out from docs/child-protocol-wire.md §2.7: the bytes a canonical string carries raw
// without decoding.
func safeByte(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }

// skipSafeSlow is skipSafe one byte at a time.
func skipSafeSlow(p []byte, i int) int {
	for i < len(p) && safeByte(p[i]) {
		i++
	}
	return i
}

// appendStringSlow is AppendString one code point at a time, without spans or word
// skips: the definition the fast walker must reproduce.
func appendStringSlow(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if sr, ok := surrogateAt(s, i); ok {
			r, size = sr, 3
		}
		dst = appendJSONRune(dst, r)
		i += size
	}
	return append(dst, '"')
}

// checkSkipSafe compares skipSafe (both instantiations) with the byte loop from every
// start.
func checkSkipSafe(t *testing.T, p []byte) {
	t.Helper()
	for i := 0; i <= len(p); i++ {
		want := skipSafeSlow(p, i)
		if got := skipSafe(p, i); got != want {
			t.Fatalf("skipSafe(%q, %d) = %d, want %d", p, i, got, want)
		}
		if got := skipSafe(string(p), i); got != want {
			t.Fatalf("skipSafe(string %q, %d) = %d, want %d", p, i, got, want)
		}
	}
}

// Every byte value, alone and next to every other, at every position of a word
// (the word-at-a-time test is exact, borrows included).
func TestSkipSafeExhaustive(t *testing.T) {
	p := []byte(strings.Repeat("a", 20))
	for pos := range 9 {
		for c := range 256 {
			q := bytes.Clone(p)
			q[pos+2] = byte(c)
			checkSkipSafe(t, q)
			for d := range 256 {
				q[pos+3] = byte(d)
				if got, want := skipSafe(q, 0), skipSafeSlow(q, 0); got != want {
					t.Fatalf("skipSafe(%q) = %d, want %d", q, got, want)
				}
			}
		}
	}
}

func FuzzSkipSafe(f *testing.F) {
	f.Add([]byte("abcdefgh\x1fijklmnop\"qrstuvwx\\yz\x7f\x80\xff é\x00"))
	f.Add([]byte(strings.Repeat("0123456789", 5) + "\x00"))
	f.Fuzz(func(t *testing.T, p []byte) { checkSkipSafe(t, p) })
}

// FuzzAppendString: the span walker (with its word skips) against the code-point
// walk, and stringCost against the encoded length, for arbitrary bytes.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{
		"plain", strings.Repeat("x", 40) + "\"" + strings.Repeat("y", 9) + "\\\n\x00\x7f",
		"é中😀" + strings.Repeat("ab", 9) + "\xed\xa0\x80\xed\xb0\x80", "\xff\xed\xa0 \xc3",
		strings.Repeat("long ascii run ", 7) + "\u2028\ufffd\t",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := appendStringSlow([]byte("<"), s)
		if got := AppendString([]byte("<"), s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %q, want %q", s, got, want)
		}
		if n := stringCost(s); n != int64(len(want)-1) {
			t.Fatalf("stringCost(%q) = %d, want %d", s, n, len(want)-1)
		}
	})
}
