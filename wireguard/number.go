package wireguard

import (
	"bytes"
	"math"
	"strconv"
)

// numberBufLen holds any canonical spelling: at most 21 integer digits, 17
// significant digits with a 7-character decimal prefix, or an exponent form; and the
// exact digits of any finite double (309) for the integer-exactness check.
const numberBufLen = 320

// AppendNumber appends f in the canonical spelling of docs/child-protocol-wire.md §2.7: ECMAScript
// Number::toString, except that an integral value below 10^21 in magnitude is written
// with its exact integer digits (2^60 → 1152921504606846976). Negative zero is
// written 0; ±Inf and NaN as Infinity, -Infinity and NaN (the meter's spelling of a
// non-lossless number — never valid JSON output).
func AppendNumber(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	if f < 1e21 && f == math.Trunc(f) {
		return strconv.AppendFloat(dst, f, 'f', 0, 64)
	}
	var buf [32]byte
	digits, n := shortestDigits(buf[:0], f)
	return appendECMA(dst, digits, n)
}

// shortestDigits returns the shortest round-tripping decimal digits of f > 0 and the
// ECMAScript exponent n, such that f = 0.digits × 10^n.
func shortestDigits(buf []byte, f float64) (digits []byte, n int) {
	e := strconv.AppendFloat(buf, f, 'e', -1, 64) // d[.ddd]e±XX
	k := bytes.IndexByte(e, 'e')
	x := 0
	for _, c := range e[k+2:] {
		x = x*10 + int(c-'0')
	}
	if e[k+1] == '-' {
		x = -x
	}
	mant := e[:k]
	if len(mant) > 1 { // drop the '.' in place: d.ddd → dddd
		copy(mant[1:], mant[2:])
		mant = mant[:len(mant)-1]
	}
	return mant, x + 1
}

// appendECMA spells digits × 10^(n−len(digits)) per Number::toString steps for a
// non-integral value or one of at least 10^21 (the integral case below 10^21 never
// gets here, so "digits followed by zeros" is not needed).
func appendECMA(dst, digits []byte, n int) []byte {
	switch {
	case n > 0 && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		return append(dst, digits[n:]...)
	case n > -6 && n <= 0:
		dst = append(dst, '0', '.')
		for ; n < 0; n++ {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	if n-1 >= 0 {
		dst = append(dst, '+')
	}
	return strconv.AppendInt(dst, int64(n-1), 10)
}

// numberVerdict judges one number token: its canonical spelling (in scratch) and
// whether it is lossless. Not lossless: overflow to ±Inf (spelled Infinity or
// -Infinity), negative zero (spelled 0), and an integer token whose exact value a
// double does not hold (spelled as the double it rounds to).
func numberVerdict(scratch *[numberBufLen]byte, tok []byte, integer bool) (spelling []byte, lossless bool) {
	if integer {
		neg := tok[0] == '-'
		if neg && len(tok) == 2 && tok[1] == '0' {
			return append(scratch[:0], '0'), false
		}
		if digits := len(tok) - btoi(neg); digits <= 15 {
			// Exact in a double, and already spelled with its exact digits.
			return tok, true
		}
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil { // only ErrRange can occur on a scanned token: ±Inf
		return AppendNumber(scratch[:0], f), false
	}
	if f == 0 && math.Signbit(f) {
		return append(scratch[:0], '0'), false
	}
	lossless = !integer || exactInteger(scratch, tok, f)
	return AppendNumber(scratch[:0], f), lossless
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// exactInteger reports whether the finite double f holds the integer token tok
// exactly, by comparing tok with f's exact decimal expansion (written in scratch).
func exactInteger(scratch *[numberBufLen]byte, tok []byte, f float64) bool {
	digits := strconv.AppendFloat(scratch[:0], math.Abs(f), 'f', 0, 64)
	if tok[0] == '-' {
		tok = tok[1:]
	}
	return bytes.Equal(digits, tok)
}

// unsafeInteger reports whether tok is an integer token (docs/child-protocol-wire.md §2.4 step 3.2) whose value a
// double does not hold exactly; overflow (a 400-digit integer) counts.
func unsafeInteger(tok []byte) bool {
	if len(tok)-btoi(tok[0] == '-') <= 15 {
		return false
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return true
	}
	var scratch [numberBufLen]byte
	return !exactInteger(&scratch, tok, f)
}
