package wire

import (
	"regexp"
	"strings"
)

// Identifier and reserved-name rules (docs/protocol.md §3.3).

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func wordSet(lists ...string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lists {
		for _, w := range strings.Fields(l) {
			m[w] = true
		}
	}
	return m
}

// reservedWords is the union of ECMAScript's and Python's reserved words.
var reservedWords = wordSet(
	`await break case catch class const continue debugger default delete do else enum
	export extends false finally for function if import in instanceof new null return super switch
	this throw true try typeof var void while with yield let static implements interface package
	private protected public arguments eval`,
	`False None True and as assert async def del elif except from global is lambda
	nonlocal not or pass raise match type _`)

// runtimeOwned are globals the child owns.
var runtimeOwned = wordSet(`console __coderun_main__ __builtins__ __name__ __debug__ display`)

// reservedMembers may not be a memberNameProperty.
var reservedMembers = wordSet(`name message stack args with_traceback add_note`)

// usableIdentifier: the identifier regex and not a reserved word.
func usableIdentifier(s string) bool { return identifier.MatchString(s) && !reservedWords[s] }

// isDunder matches ^__.+__$.
func isDunder(s string) bool {
	return len(s) > 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}
