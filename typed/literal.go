package typed

import (
	"encoding/json"
	"strings"
)

// pyLiteral is a JSON value (ordered tree) as a Python literal: true → True,
// null → None, numbers as written (Python ints are exact), objects and
// arrays as dict and list displays.
func pyLiteral(v any) string {
	var sb strings.Builder
	writeLiteral(&sb, v)
	return sb.String()
}

func writeLiteral(sb *strings.Builder, v any) {
	switch t := v.(type) {
	case *object:
		sb.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(pyString(k) + ": ")
			writeLiteral(sb, t.vals[k])
		}
		sb.WriteByte('}')
	case []any:
		sb.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeLiteral(sb, e)
		}
		sb.WriteByte(']')
	case string:
		sb.WriteString(pyString(t))
	case json.Number:
		sb.WriteString(string(t))
	case bool:
		sb.WriteString(map[bool]string{true: "True", false: "False"}[t])
	default:
		sb.WriteString("None")
	}
}

// fits reports whether the literal of v type-checks as typ (a type this
// package rendered). A default that does not fit is shown as "..." so the
// stub stays valid for mypy whatever default the host wrote.
func fits(v any, typ string) bool {
	for _, alt := range splitTop(typ, " | ") {
		if fitsOne(v, alt) {
			return true
		}
	}
	return false
}

func fitsOne(v any, typ string) bool {
	switch t := v.(type) {
	case string:
		return typ == "str" || typ == "Any" || literalHas(typ, pyString(t))
	case json.Number:
		isInt := !strings.ContainsAny(string(t), ".eE")
		return typ == "float" || typ == "Any" || (typ == "int" && isInt)
	case bool:
		return typ == "bool" || typ == "Any"
	case nil:
		return typ == "None" || typ == "Any"
	case []any:
		return typ == "Any" || (strings.HasPrefix(typ, "list[") && allFit(t, typ[5:len(typ)-1]))
	case *object:
		inner, ok := strings.CutPrefix(typ, "dict[str, ")
		return typ == "Any" || (ok && allFit(valuesOf(t), inner[:len(inner)-1]))
	}
	return false
}

func allFit(values []any, typ string) bool {
	for _, e := range values {
		if !fits(e, typ) {
			return false
		}
	}
	return true
}

func valuesOf(o *object) []any {
	out := make([]any, len(o.keys))
	for i, k := range o.keys {
		out[i] = o.vals[k]
	}
	return out
}

// literalHas reports whether Literal[...] text typ lists the quoted member.
func literalHas(typ, quoted string) bool {
	members, ok := strings.CutPrefix(typ, "Literal[")
	if !ok {
		return false
	}
	members = ", " + strings.TrimSuffix(members, "]") + ", "
	return strings.Contains(members, ", "+quoted+", ")
}

// splitTop splits a type expression at sep outside brackets and quotes.
func splitTop(typ, sep string) []string {
	var parts []string
	depth, start, quoted := 0, 0, false
	for i := 0; i < len(typ); i++ {
		switch c := typ[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '[':
			depth++
		case c == ']':
			depth--
		case depth == 0 && strings.HasPrefix(typ[i:], sep):
			parts = append(parts, typ[start:i])
			start = i + len(sep)
		}
	}
	return append(parts, typ[start:])
}
