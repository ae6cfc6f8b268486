package typed

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// camel turns a name into a CamelCase Python class name: ASCII letters and
// digits kept, every other character a word break ("web_api" → "WebApi").
func camel(s string) string {
	var sb strings.Builder
	upper := true
	for _, c := range s {
		alnum := c < utf8.RuneSelf && (unicode.IsLetter(c) || unicode.IsDigit(c))
		switch {
		case !alnum:
			upper = true
		case upper:
			sb.WriteRune(unicode.ToUpper(c))
			upper = false
		default:
			sb.WriteRune(c)
		}
	}
	name := sb.String()
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		name = "T" + name
	}
	return name
}

// namer hands out module-level names, suffixing a taken one with 2, 3, ….
type namer struct{ taken map[string]bool }

func newNamer(reserved ...string) *namer {
	n := &namer{taken: map[string]bool{}}
	for k := range pythonKeywords {
		n.taken[k] = true
	}
	for _, r := range append(reserved, "Any", "Literal", "TypedDict", "str", "int", "float", "bool", "list", "dict") {
		n.taken[r] = true
	}
	return n
}

func (n *namer) unique(base string) string {
	name := base
	for i := 2; n.taken[name]; i++ {
		name = base + strconv.Itoa(i)
	}
	n.taken[name] = true
	return name
}

// pyString is s as a double-quoted Python string literal: quote, backslash
// and every non-printable character escaped, so it never ends a line or the
// literal early.
func pyString(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(c)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == ' ' || (unicode.IsPrint(c) && c != utf8.RuneError):
			sb.WriteRune(c)
		default:
			sb.WriteString(escapeRune(c))
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

func escapeRune(c rune) string {
	switch {
	case c < 0x100:
		return `\x` + hex(int(c), 2)
	case c < 0x10000:
		return `\u` + hex(int(c), 4)
	}
	return `\U` + hex(int(c), 8)
}

func hex(v, width int) string {
	s := strconv.FormatInt(int64(v), 16)
	return strings.Repeat("0", width-len(s)) + s
}

// docBody is text made safe inside a """docstring""": backslashes doubled,
// a quote escaped when another quote or the closing delimiter follows it (so
// no run of three can form), controls other than newline and tab escaped.
func docBody(text string) string {
	var sb strings.Builder
	for i, c := range text {
		switch {
		case c == '\\' || (c == '"' && (i+1 == len(text) || text[i+1] == '"')):
			sb.WriteByte('\\')
			sb.WriteRune(c)
		case c == '\n' || c == '\t' || c == ' ' || (unicode.IsPrint(c) && c != utf8.RuneError):
			sb.WriteRune(c)
		default:
			sb.WriteString(escapeRune(c))
		}
	}
	return sb.String()
}

// commentText is text made safe for one comment line.
func commentText(text string) string {
	s := pyString(text)
	return s[1 : len(s)-1]
}
