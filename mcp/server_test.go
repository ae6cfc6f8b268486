package mcp

import (
	"strings"
	"testing"
)

// An upstream's error text becomes one comment line of run_python's
// description whatever line breaks it holds: none of Python's splitlines
// separators survives.
func TestCommentLine(t *testing.T) {
	text := "nope\rclass Admin:\r\n    async def delete(self) -> Any:\v\f\x1c\x1d\x1e\u0085\u2028\u2029admin: Admin\n#"
	got := commentLine(text)
	breaks := "\n\r\v\f\x1c\x1d\x1e\u0085\u2028\u2029"
	drop := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == ' ' || strings.ContainsRune(breaks, r) {
				return -1
			}
			return r
		}, s)
	}
	if drop(got) != drop(text) || len([]rune(got)) != len([]rune(text)) {
		t.Errorf("commentLine changed more than the line breaks: %q", got)
	}
	for _, r := range breaks {
		if strings.ContainsRune(got, r) {
			t.Errorf("commentLine left %U in %q", r, got)
		}
	}
}
