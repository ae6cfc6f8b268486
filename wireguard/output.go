package wireguard

import (
	"bytes"
	"slices"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// An output frame (docs/child-protocol-wire.md §2.2) is {"type":"output","data":{mime: string, …}}
// or {"type":"output","truncated":true}. Its data is checked where it lies in the
// frame and only measured: the session bills DataSize against the outputs budget
// and copies the data (OutputData) only when it fits, so a hostile child cannot
// make the daemon keep more than the budget.

// rebuildOutput keeps a truncation notice, or a data object whose every member
// is a string: text for a text type, strict standard base64 otherwise
// (protocol.IsTextMime). An empty object, a repeated type or a bad payload
// makes the frame junk. An object of more than protocol.MaxOutputEntries
// members is rebuilt as a truncation notice: the honest child never sends one
// (it cuts the bundle), and the budget's marker says that outputs were lost.
// A raster image that protocol.ImageProblem refuses is set apart in Refused.
func rebuildOutput(f Frame, m *[mCount]rawMember) (Frame, bool) {
	if isTrue(m[mTruncated]) {
		f.Truncated = true
		return f, true
	}
	if m[mData].kind != tokBeginObject {
		return Frame{}, false
	}
	size, canonical, kept, refused, verdict := outputSize(m[mData].value)
	switch verdict {
	case outputJunk:
		return Frame{}, false
	case outputTooMany:
		f.Truncated = true
		return f, true
	}
	f.Refused = refused
	if kept == 0 { // every type was a refused image: only the notes are left
		return f, true
	}
	f.Data, f.DataSize, f.dataCanonical = m[mData].value, size, canonical
	return f, true
}

// RefusedImage is a raster image member of an output that
// protocol.ImageProblem refuses: it is not billed, and OutputCopy leaves it
// out.
type RefusedImage struct {
	Mime    string
	Problem string // protocol.ImageProblem's
}

// outputVerdict is outputSize's judgement of a data object.
type outputVerdict int

const (
	outputOK      outputVerdict = iota
	outputJunk                  // not a valid output: the frame is dropped
	outputTooMany               // more than protocol.MaxOutputEntries members
)

// outputSize walks a data object, checking each member, and returns its cost
// against the outputs budget (docs/protocol-files.md §12.4): protocol.OutputOverhead,
// and for each member protocol.OutputEntryOverhead, its name's text cost and
// its payload's (payloadSize); and whether the object is already in canonical
// form: compact, no escape anywhere (what the honest child writes for base64
// and plain text); how many members it keeps; and the raster images among them
// that protocol.ImageProblem refuses, which are neither billed nor kept. The
// object is part of a frame frameMembers has validated,
// so it is split in place, not scanned again (a megabyte of base64 is crossed
// at memchr speed here), and the walk stops at the first member past the cap:
// nothing is allocated in proportion to the number of members.
func outputSize(data []byte) (size int64, canonical bool, kept int, refused []RefusedImage, verdict outputVerdict) {
	names := make([]string, 0, 4)
	size = protocol.OutputOverhead
	compact := int64(1) // the closing brace; each member adds its separator
	for i := validSkipSpace(data, 1); data[i] != '}'; {
		if len(names) == protocol.MaxOutputEntries {
			return 0, false, 0, nil, outputTooMany
		}
		nameEnd := validStringEnd(data, i)
		start := validSkipSpace(data, validSkipSpace(data, nameEnd)+1) // past the ':'
		end := validValueEnd(data, start)
		nameTok, value := data[i:nameEnd], data[start:end]
		name := decodeTokenString(nameTok)
		if name == "" || slices.Contains(names, name) || KindOf(value) != KindString {
			return 0, false, 0, nil, outputJunk
		}
		names = append(names, name)
		n, ok := payloadSize(name, value)
		if !ok {
			return 0, false, 0, nil, outputJunk
		}
		i = validNextItem(data, end)
		if problem := imageProblem(name, value[1:len(value)-1]); problem != "" {
			refused = append(refused, RefusedImage{Mime: name, Problem: problem})
			continue
		}
		size += protocol.OutputEntryOverhead + textCost(nameTok) + n
		compact += int64(len(nameTok) + 2 + len(value)) // ':' and separator; exact when unescaped
	}
	if len(names) == 0 {
		return 0, false, 0, nil, outputJunk
	}
	canonical = len(refused) == 0 && compact == int64(len(data)) && bytes.IndexByte(data, '\\') < 0
	return size, canonical, len(names) - len(refused), refused, outputOK
}

// OutputCopy is a fresh canonical copy of a checked output frame's Data
// without its refused images: a plain copy when it already is canonical,
// else OutputData's rebuild.
func (f *Frame) OutputCopy() []byte {
	if f.dataCanonical {
		return bytes.Clone(f.Data)
	}
	return outputData(f.Data, f.Refused)
}

// payloadSize is a member's cost, and whether its payload is acceptable:
// the text cost of text, the decoded bytes of base64.
func payloadSize(mime string, tok []byte) (int64, bool) {
	if protocol.IsTextMime(mime) {
		return textCost(tok), true
	}
	return base64Size(tok[1 : len(tok)-1])
}

// textCost is the length of the string token tok in canonical JSON form
// without its quotes (len(appendTokenString(nil, tok)) - 2), without
// building it: UTF-8 bytes, an escape counted as the daemon writes it
// (runeJSONLen), so what the daemon holds and sends for a text is what it
// billed, whatever the text holds.
func textCost(tok []byte) int64 {
	body := tok[1 : len(tok)-1]
	var n int64
	for i := 0; i < len(body); {
		next, r, span := nextTokenPiece(body, i)
		if span {
			n += int64(next - i)
		} else {
			n += int64(runeJSONLen(r))
		}
		i = next
	}
	return n
}

// OutputData is the canonical compact form of a checked output frame's Data: a
// fresh copy, with each member's name and text in canonical JSON string form
// (base64 is already canonical).
func OutputData(data []byte) []byte { return outputData(data, nil) }

// outputData is OutputData without the members named in skip.
func outputData(data []byte, skip []RefusedImage) []byte {
	out := make([]byte, 0, len(data))
	out = append(out, '{')
	s := newScanner(data, Strict)
	walkObject(&s, false, func(rm rawMember) bool {
		if len(skip) > 0 && slices.ContainsFunc(skip, func(m RefusedImage) bool { return m.Mime == decodeTokenString(rm.name) }) {
			return true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(appendTokenString(out, rm.name), ':')
		out = appendTokenString(out, rm.value)
		return true
	})
	return append(out, '}')
}
