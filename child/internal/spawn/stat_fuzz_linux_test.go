//go:build linux

package spawn

import (
	"bytes"
	"fmt"
	"testing"
)

// FuzzParseStartTime states the parser's property: for any command name
// (the kernel allows any bytes but NUL, including spaces, newlines and
// parentheses), the start time written in field 22 is the one read back; and
// no input panics.
func FuzzParseStartTime(f *testing.F) {
	f.Add([]byte("sleep"), uint64(987654))
	f.Add([]byte("a b) (c"), uint64(5))
	f.Add([]byte(") 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 ("), uint64(0))
	f.Fuzz(func(t *testing.T, comm []byte, start uint64) {
		parseStartTime(comm) // arbitrary input: must not panic
		if bytes.IndexByte(comm, 0) >= 0 {
			return
		}
		line := fmt.Sprintf("4242 (%s) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %d 1234 56 18446744073709551615\n", comm, start)
		got, ok := parseStartTime([]byte(line))
		if !ok || got != start {
			t.Fatalf("parseStartTime(%q) = %d, %v; want %d", line, got, ok, start)
		}
	})
}
