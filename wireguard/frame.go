package wireguard

import (
	"bytes"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Frame is one child frame rebuilt from its raw line (docs/child-protocol-wire.md §2.5). Only the fields of its
// Type are set; everything else the child sent is stripped.
type Frame struct {
	Type            string                   // protocol.FrameBootAck, FrameCall, FrameLog, FrameDone
	Text            string                   // log: WTF-8
	Open, Truncated bool                     // log: the member was literally true
	ID              float64                  // call: finite, not -0 (not necessarily integral)
	Global, Name    string                   // call: WTF-8
	Args            []byte                   // call: canonical compact JSON, lossless
	HasValue        bool                     // done: a "value" member was present
	Value           []byte                   // done: the raw value text as received (aliases line)
	Error           *protocol.DoneErrorField // done: rebuilt error (exceptionType cut, line checked)
	Data            []byte                   // output: the checked data object as received (aliases line)
	DataSize        int64                    // output: its decoded size (see OutputData)
	dataCanonical   bool                     // output: Data is already canonical (OutputCopy)
	Refused         []RefusedImage           // output: images left out of Data's copy; Data is nil when nothing else is left
}

// Members of a frame the rebuild reads, index-aligned with frameNames.
const (
	mType = iota
	mText
	mOpen
	mTruncated
	mID
	mGlobal
	mName
	mArgs
	mValue
	mError
	mData
	mCount
)

var frameNames = []string{"type", "text", "open", "truncated", "id", "global", "name", "args", "value", "error", "data"}

// Members of a done frame's error object, index-aligned with errorNames.
const (
	eKind = iota
	eMessage
	eExceptionType
	eLine
	ePath
	eHint
	eCount
)

var errorNames = []string{"kind", "message", "exceptionType", "line", "path", "hint"}

// DecodeFrame decodes and rebuilds one child frame (docs/child-protocol-wire.md §2.4 step 3, docs/child-protocol-wire.md §2.5); ok=false
// means the frame is junk and is dropped. It never panics and never repairs: the line
// must be strict UTF-8, hold no integer token a double cannot hold exactly (outside
// strings), parse as exactly one JSON object, and have the shape of its type.
//
// Duplicate member names: a frame whose object names a frame field (type, text, open,
// truncated, id, global, name, args, value, error, data — whatever its type) more than once,
// or whose error object repeats kind, message, exceptionType or line, is dropped:
// which one the child meant is ambiguous, and Python would silently take the last.
// Repeats of other names are ignored, like those names themselves. Inside args and value, duplicates are program
// data and pass through unmerged (docs/child-protocol-wire.md §2.7).
func DecodeFrame(line []byte) (Frame, bool) {
	var m [mCount]rawMember
	if !frameMembers(line, frameNames, m[:]) || m[mType].kind != tokString { // strict UTF-8 included
		return Frame{}, false
	}
	f := Frame{Type: decodeTokenString(m[mType].value)}
	switch f.Type {
	case protocol.FrameBootAck:
		return f, true
	case protocol.FrameLog:
		return rebuildLog(f, &m)
	case protocol.FrameCall:
		return rebuildCall(f, &m)
	case protocol.FrameDone:
		return rebuildDone(f, &m)
	case protocol.FrameOutput:
		return rebuildOutput(f, &m)
	}
	return Frame{}, false
}

func rebuildLog(f Frame, m *[mCount]rawMember) (Frame, bool) {
	if m[mText].kind != tokString {
		return Frame{}, false
	}
	f.Text = decodeTokenString(m[mText].value)
	f.Open = isTrue(m[mOpen])
	f.Truncated = isTrue(m[mTruncated])
	return f, true
}

// isTrue reports whether a member is the literal true (1, "yes" are not).
func isTrue(v rawMember) bool { return v.kind == tokLiteral && string(v.value) == "true" }

func rebuildCall(f Frame, m *[mCount]rawMember) (Frame, bool) {
	if m[mID].kind != tokNumber || m[mGlobal].kind != tokString || m[mName].kind != tokString || m[mArgs].kind == tokEOF {
		return Frame{}, false
	}
	id, err := strconv.ParseFloat(string(m[mID].value), 64)
	if err != nil || id == 0 && math.Signbit(id) {
		return Frame{}, false
	}
	args, v := CheckValue(m[mArgs].value, math.MaxInt64)
	if v != VerdictOK {
		return Frame{}, false
	}
	f.ID, f.Args = id, args
	f.Global = decodeTokenString(m[mGlobal].value)
	f.Name = decodeTokenString(m[mName].value)
	return f, true
}

func rebuildDone(f Frame, m *[mCount]rawMember) (Frame, bool) {
	if m[mValue].kind != tokEOF {
		f.HasValue, f.Value = true, m[mValue].value
	}
	if m[mError].kind == tokEOF {
		return f, true
	}
	e, ok := rebuildError(m[mError])
	if !ok {
		return Frame{}, false
	}
	f.Error = e
	return f, true
}

// rebuildError keeps an error object with a string message and a known kind;
// exceptionType (cut to 200 code points) and line (an integral value from 1 to
// 2147483647; 3.0 counts, as every JSON number is a double) survive only with kind
// exception, path and hint (strings, cut to 600 and 200 code points) only with kind
// invalid-output; they are stripped silently otherwise.
func rebuildError(v rawMember) (*protocol.DoneErrorField, bool) {
	var m [eCount]rawMember
	if v.kind != tokBeginObject || !frameMembers(v.value, errorNames, m[:]) ||
		m[eKind].kind != tokString || m[eMessage].kind != tokString {
		return nil, false
	}
	e := &protocol.DoneErrorField{
		Kind:    decodeTokenString(m[eKind].value),
		Message: decodeTokenString(m[eMessage].value),
	}
	switch e.Kind {
	case protocol.KindException:
	case protocol.KindInvalidOutput:
		e.Path = cutString(m[ePath], protocol.PathCut)
		e.Hint = cutString(m[eHint], protocol.HintCut)
		return e, true
	case protocol.KindOutputLimit:
		return e, true
	default:
		return nil, false
	}
	e.ExceptionType = cutString(m[eExceptionType], protocol.NameCut)
	if line, ok := errorLine(m[eLine]); ok {
		e.Line = &line
	}
	return e, true
}

// cutString is v's text cut to n code points, or nil when v is not a string.
func cutString(v rawMember, n int) *string {
	if v.kind != tokString {
		return nil
	}
	s := cutChars(decodeTokenString(v.value), n)
	return &s
}

func errorLine(v rawMember) (int64, bool) {
	if v.kind != tokNumber {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v.value), 64)
	if err != nil || f != math.Trunc(f) || f < 1 || f > math.MaxInt32 {
		return 0, false
	}
	return int64(f), true
}

// cutChars keeps the first n code points of the WTF-8 string s (a lone surrogate is
// one code point).
func cutChars(s string, n int) string {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		if _, ok := surrogateAt(s, i); ok {
			size = 3
		}
		i += size
	}
	return s[:i]
}

// frameMembers scans src, which must be exactly one JSON object in strict UTF-8, and
// stores in out the members named in names (index-aligned). It fails on bad syntax,
// on a repeated wanted name, and on an unsafe integer token anywhere in src.
func frameMembers(src []byte, names []string, out []rawMember) bool {
	s := newScanner(src, Strict)
	return walkObject(&s, true, func(m rawMember) bool {
		i := nameIndex(m.name, names)
		if i < 0 {
			return true
		}
		if out[i].kind != tokEOF {
			return false
		}
		out[i] = m
		return true
	}) == nil
}

// nameIndex returns the index of the decoded name token in names, or -1.
func nameIndex(tok []byte, names []string) int {
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') >= 0 {
		body = []byte(decodeTokenString(tok))
	}
	for i, n := range names {
		if string(body) == n {
			return i
		}
	}
	return -1
}
