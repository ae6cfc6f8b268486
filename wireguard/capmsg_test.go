package wireguard

import (
	"strings"
	"testing"
)

const trunc = "… [truncated]"

// §4.7 examples.
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
