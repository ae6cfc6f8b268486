package wireguard

// DeclaredType is the type a frame declares up front: the string value of its
// first member when head, the frame's first bytes, begins with a "type"
// member whose value holds no escape ({"type":"log",… or
// {"type": "done", …, as the child writes them); "" otherwise. A bounded
// Framer's owner reads it to judge a long frame before the frame is held
// (docs/child-protocol-wire.md §2.4 step 2).
func DeclaredType(head []byte) string {
	i := skipJSONSpace(head, 0)
	for _, want := range [...]string{"{", `"type"`, ":"} {
		if len(head)-i < len(want) || string(head[i:i+len(want)]) != want {
			return ""
		}
		i = skipJSONSpace(head, i+len(want))
	}
	if i >= len(head) || head[i] != '"' {
		return ""
	}
	for j := i + 1; j < len(head); j++ {
		switch head[j] {
		case '"':
			return string(head[i+1 : j])
		case '\\':
			return ""
		}
	}
	return ""
}

// skipJSONSpace is the offset of the first byte at or after i that is not JSON
// whitespace.
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
