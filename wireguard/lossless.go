package wireguard

import "math"

// Verdict is the judgement of a value against a byte budget (docs/child-protocol-wire.md §2.7, docs/child-protocol-wire.md §2.8).
type Verdict int

const (
	VerdictOK          Verdict = iota // lossless and within budget
	VerdictOverBudget                 // canonical form longer than the budget
	VerdictNonLossless                // within budget, but not lossless JSON
)

func (v Verdict) String() string {
	switch v {
	case VerdictOK:
		return "ok"
	case VerdictOverBudget:
		return "over-budget"
	}
	return "non-lossless"
}

// CheckValue meters raw — one JSON value in any valid spelling, surrounding
// whitespace allowed — by the length of its canonical compact form, and when that
// fits budget and the value is lossless returns the canonical text (a fresh slice of
// exactly that length).
//
// Over-budget is decided before non-losslessness (docs/child-protocol-wire.md §2.8): the walk stops as soon as
// the running length exceeds budget, without looking further and without allocating
// anything proportional to the input; a non-lossless number meters by its own
// spelling (Infinity, -Infinity, 0 for negative zero). Text that is not valid JSON in
// valid UTF-8 is VerdictNonLossless unless the budget ran out before the fault.
func CheckValue(raw []byte, budget int64) (canonical []byte, v Verdict) {
	n, v := meter(raw, budget)
	if v != VerdictOK {
		return nil, v
	}
	return encode(raw, n), VerdictOK
}

// CheckClientResult judges a client's result text (docs/child-protocol-wire.md §2.7, docs/child-protocol-wire.md §2.9) with the same rules:
// strict UTF-8 and syntax, no unsafe integer token, no overflow, no negative zero.
// ok → canonical compact text. (The scanner enforces strict UTF-8: non-ASCII outside
// strings is a syntax error, and strings are validated.)
func CheckClientResult(raw []byte) (canonical []byte, ok bool) {
	canonical, v := CheckValue(raw, math.MaxInt64)
	return canonical, v == VerdictOK
}

// meter computes the canonical length of raw, stopping once it exceeds budget.
func meter(raw []byte, budget int64) (int64, Verdict) {
	var scratch [numberBufLen]byte
	s := newScanner(raw, Strict)
	lossless := true
	var n int64
	for {
		t, ok := s.next()
		switch {
		case !ok:
			return 0, VerdictNonLossless
		case t.kind == tokEOF:
			if !lossless {
				return n, VerdictNonLossless
			}
			return n, VerdictOK
		case t.sep != 0:
			n++
		}
		switch tok := raw[t.start:t.end]; t.kind {
		case tokString:
			n += tokenStringLen(tok)
		case tokNumber:
			spelling, ok := numberVerdict(&scratch, tok, t.integer)
			n += int64(len(spelling))
			lossless = lossless && ok
		default: // brackets and literals are canonical as they stand
			n += int64(len(tok))
		}
		if n > budget {
			return n, VerdictOverBudget
		}
	}
}

// encode writes the canonical form of raw, which meter has accepted at length size.
func encode(raw []byte, size int64) []byte {
	var scratch [numberBufLen]byte
	out := make([]byte, 0, size)
	s := newScanner(raw, Strict)
	for {
		t, _ := s.next()
		if t.kind == tokEOF {
			return out
		}
		if t.sep != 0 {
			out = append(out, t.sep)
		}
		switch tok := raw[t.start:t.end]; t.kind {
		case tokString:
			out = appendTokenString(out, tok)
		case tokNumber:
			spelling, _ := numberVerdict(&scratch, tok, t.integer)
			out = append(out, spelling...)
		default:
			out = append(out, tok...)
		}
	}
}
