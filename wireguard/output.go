package wireguard

import (
	"bytes"
	"unicode/utf8"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// An output frame (docs/child-protocol.md §2.2) is {"type":"output","data":{mime: string, …}}
// or {"type":"output","truncated":true}. Its data is checked where it lies in the
// frame and only measured: the session bills DataSize against the outputs budget
// and copies the data (OutputData) only when it fits, so a hostile child cannot
// make the daemon keep more than the budget.

// rebuildOutput keeps a truncation notice, or a data object whose every member
// is a string: text for a text type, strict standard base64 otherwise
// (protocol.IsTextMime). An empty object, a repeated type or a bad payload
// makes the frame junk.
func rebuildOutput(f Frame, m *[mCount]rawMember) (Frame, bool) {
	if isTrue(m[mTruncated]) {
		f.Truncated = true
		return f, true
	}
	if m[mData].kind != tokBeginObject {
		return Frame{}, false
	}
	size, canonical, ok := outputSize(m[mData].value)
	if !ok {
		return Frame{}, false
	}
	f.Data, f.DataSize, f.dataCanonical = m[mData].value, size, canonical
	return f, true
}

// outputSize walks a data object, checking each member, and returns the sum of
// the decoded sizes (UTF-8 bytes of text, raw bytes of base64) and whether
// the object is already in canonical form: compact, no escape anywhere (what
// the honest child writes for base64 and plain text). The object is part of
// a frame frameMembers has validated, so it is split (ValidMembers), not
// scanned again: a megabyte of base64 is crossed at memchr speed here.
func outputSize(data []byte) (size int64, canonical, ok bool) {
	ms, _ := ValidMembers(data)
	seen := make(map[string]bool, len(ms))
	compact := int64(1) // the closing brace; each member adds its separator
	for _, m := range ms {
		if seen[m.Name] || m.Name == "" || KindOf(m.Value) != KindString {
			return 0, false, false
		}
		seen[m.Name] = true
		compact += int64(len(m.Name) + 4 + len(m.Value)) // quotes, ':' and separator; exact when unescaped
		n, ok := payloadSize(m.Name, m.Value)
		if !ok {
			return 0, false, false
		}
		size += n
	}
	canonical = compact == int64(len(data)) && bytes.IndexByte(data, '\\') < 0
	return size, canonical, len(ms) > 0
}

// OutputCopy is a fresh canonical copy of a checked output frame's Data: a
// plain copy when it already is canonical, else OutputData.
func (f *Frame) OutputCopy() []byte {
	if f.dataCanonical {
		return bytes.Clone(f.Data)
	}
	return OutputData(f.Data)
}

// payloadSize is a member's decoded size, and whether its payload is acceptable.
func payloadSize(mime string, tok []byte) (int64, bool) {
	if protocol.IsTextMime(mime) {
		return decodedLen(tok), true
	}
	return base64Size(tok[1 : len(tok)-1])
}

// decodedLen is len(decodeTokenString(tok)), without building it.
func decodedLen(tok []byte) int64 {
	body := tok[1 : len(tok)-1]
	var n int64
	for i := 0; i < len(body); {
		next, r, span := nextTokenPiece(body, i)
		switch {
		case span:
			n += int64(next - i)
		case isSurrogate(r):
			n += 3
		default:
			n += int64(utf8.RuneLen(r))
		}
		i = next
	}
	return n
}

// OutputData is the canonical compact form of a checked output frame's Data: a
// fresh copy, with each member's name and text in canonical JSON string form
// (base64 is already canonical).
func OutputData(data []byte) []byte {
	out := make([]byte, 0, len(data))
	out = append(out, '{')
	s := newScanner(data, Strict)
	walkObject(&s, false, func(rm rawMember) bool {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(appendTokenString(out, rm.name), ':')
		out = appendTokenString(out, rm.value)
		return true
	})
	return append(out, '}')
}
