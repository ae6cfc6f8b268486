package wireguard

import (
	"strings"
	"testing"
	"unicode/utf8"
)

const trunc = "… [truncated]"

// docs/child-protocol-daemon.md §4.7 examples.
func TestCapMessage(t *testing.T) {
	emoji := "😀"
	for _, c := range []struct {
		name string
		msg  string
		cap  int64
		want string
	}{
		{"48 MiB of E at 64", strings.Repeat("E", 48<<20), 64, strings.Repeat("E", 49) + trunc},
		{"emoji tail at 32", strings.Repeat("A", 32) + strings.Repeat(emoji, 4), 32, strings.Repeat("A", 17) + trunc},
		{"cut inside an emoji", "E" + strings.Repeat(emoji, 2000), 66, "E" + strings.Repeat(emoji, 12) + trunc},
		{"F at 40", strings.Repeat("F", 100000), 40, strings.Repeat("F", 25) + trunc},
		{"cap 4", "hello, world, long enough", 4, trunc},
		{"cap 0", "x", 0, trunc},
		{"negative cap, empty message", "", -1, trunc},
		{"fits", "中文中文中文", 64, "中文中文中文"},
		{"exactly cap", strings.Repeat("a", 20), 20, strings.Repeat("a", 20)},
		{"lone surrogate is 3 bytes", "ab\xed\xa0\x80cdefghijklmnopqrst", 18, "ab" + trunc},
		{"cut after a lone surrogate", "ab\xed\xa0\x80cdefghijklmnopqrst", 20, "ab\xed\xa0\x80" + trunc},
	} {
		got := CapMessage(c.msg, c.cap)
		if got != c.want {
			t.Errorf("%s: got %q (%d bytes), want %q", c.name, got, len(got), c.want)
		}
		if c.cap >= 15 && int64(len(got)) > c.cap {
			t.Errorf("%s: %d bytes over cap %d", c.name, len(got), c.cap)
		}
	}
}

// FuzzCapMessage: never panics; the result fits a cap of at least 15; a changed
// message is a prefix plus the marker, and the prefix of valid UTF-8 never ends
// inside a character.
func FuzzCapMessage(f *testing.F) {
	f.Add("E"+strings.Repeat("😀", 20), int64(66))
	f.Add("ab\xed\xa0\x80cdefghijklmnopqrst", int64(18))
	f.Add("", int64(-1))
	f.Fuzz(func(t *testing.T, msg string, cap int64) {
		got := CapMessage(msg, cap)
		if got == msg {
			if int64(len(msg)) > cap {
				t.Fatalf("%d bytes over cap %d unchanged", len(msg), cap)
			}
			return
		}
		prefix, ok := strings.CutSuffix(got, trunc)
		if !ok || !strings.HasPrefix(msg, prefix) || cap >= 15 && int64(len(got)) > cap {
			t.Fatalf("CapMessage(%q, %d) = %q", msg, cap, got)
		}
		if utf8.ValidString(msg) && !utf8.ValidString(prefix) {
			t.Fatalf("cut inside a character: %q", got)
		}
	})
}
