package wireguard

import (
	"strings"
	"testing"
)

// §2.7 string rules; stringCost is always the encoded length.
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
