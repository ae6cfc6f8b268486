package mcp

import (
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
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

// C965: the description's examples name only tools a server has, and only
// names that read the same in its text: a method the stubs declare, and by
// subscript a name of printable ASCII without a quote or a backslash; an
// upstream's name that could break the text is never shown as an example.
func TestToolsIntroExamples(t *testing.T) {
	hostile := []string{"x\"]\nimport os", "a\\b", "sp ace", "déjà-vu", "class", "self"}
	nss := []protocol.Namespace{{Global: "files", Names: append(hostile, "read-file", "list_dir")}}
	intro := toolsIntro(nss)
	for _, want := range []string{"r = await files.list_dir(...)", `files["read-file"](...)`} {
		if !strings.Contains(intro, want) {
			t.Errorf("the intro lacks %q:\n%s", want, intro)
		}
	}
	for _, h := range hostile {
		if strings.Contains(intro, h) {
			t.Errorf("the intro shows the name %q:\n%s", h, intro)
		}
	}
	if got := toolsIntro([]protocol.Namespace{{Global: "odd", Names: hostile}}); strings.Contains(got, "odd") {
		t.Errorf("with no name fit for an example the intro still shows one:\n%s", got)
	}
}
