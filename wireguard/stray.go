package wireguard

import (
	"bytes"
	"unicode/utf8"
)

// Stray native output (docs/child-protocol-daemon.md §4.5). Each stream keeps a raw-byte residual: the bytes since
// its last newline. A complete line is rendered with per-byte replacement and admitted
// as an ordinary entry (rule 4). While bytes accumulate, the residual tracks the
// serialized cost of its content as it will render, so trigger (b) — the combined
// pending cost of both residuals + 3 exceeds the remaining ledger — is checked after
// every byte, whatever the read boundaries.
//
// An incomplete multibyte sequence at the end of a residual is counted at the width
// its lead byte announces: a lower bound of what it will cost (its completed character
// costs exactly that, a broken one 3 per byte), so trigger (b) never fires for a line
// that could still fit.

// residual is one stream's unterminated line.
type residual struct {
	buf  []byte // our own copy of the raw bytes, nil when empty
	cost int64  // content cost of buf as rendered, the incomplete tail at its lower bound
	tail int    // length of the incomplete multibyte sequence ending buf
	need int    // the sequence length its lead byte announces
	lead byte   // that lead byte
}

// asciiCost is runeJSONLen for the ASCII bytes.
var asciiCost = func() (t [utf8.RuneSelf]int8) {
	for c := range t {
		t[c] = int8(runeJSONLen(rune(c)))
	}
	return t
}()

// Stray consumes raw bytes read from the child's fd 1 (stream 1) or fd 2 (stream 2);
// other stream numbers are ignored, as is everything after truncation.
func (c *Capture) Stray(stream int, p []byte) {
	r := c.residual(stream)
	for r != nil && !c.truncated && len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.accumulate(r, p)
			return
		}
		c.accumulate(r, p[:i])
		if c.truncated {
			return
		}
		c.admit(render(r.take(false))) // a complete line, empty or not
		p = p[i+1:]
	}
}

// StrayEOF admits what remains of a stream whose pipe reached end of stream
// (trigger a): one entry, an incomplete trailing sequence rendered as U+FFFD per byte.
func (c *Capture) StrayEOF(stream int) {
	if r := c.residual(stream); r != nil {
		c.flushResidual(r)
	}
}

// FlushStray admits both residuals in full (trigger c, the close deadline): stdout's,
// then stderr's.
func (c *Capture) FlushStray() {
	c.flushResidual(&c.stray[0])
	c.flushResidual(&c.stray[1])
}

func (c *Capture) residual(stream int) *residual {
	if stream != 1 && stream != 2 {
		return nil
	}
	return &c.stray[stream-1]
}

// flushResidual admits a non-empty residual in full as one entry.
func (c *Capture) flushResidual(r *residual) {
	if !c.truncated && len(r.buf) > 0 {
		c.admit(render(r.take(false)))
	}
}

// accumulate appends newline-free bytes to r, firing trigger (b) at the first byte
// after which the combined pending cost no longer fits.
func (c *Capture) accumulate(r *residual, p []byte) {
	start := 0
	for i, b := range p {
		r.step(b)
		if c.stray[0].cost+c.stray[1].cost+3 > c.remaining {
			r.append(p[start : i+1])
			start = i + 1
			c.flushPending()
			if c.truncated {
				return
			}
		}
	}
	r.append(p[start:])
}

// append copies p into the residual, growing it geometrically. Trigger (b) bounds the
// residual by the ledger, so no limit is needed beyond the length itself.
func (r *residual) append(p []byte) {
	if len(p) > 0 {
		n := len(r.buf) + len(p)
		r.buf = append(grow(r.buf, n, 2*n), p...)
	}
}

// flushPending is trigger (b): both residuals are admitted now, stdout's first, each
// without its incomplete trailing sequence, which is carried over. An over-budget
// residual truncates the ledger (and so discards the other).
func (c *Capture) flushPending() {
	for k := range c.stray {
		r := &c.stray[k]
		if text := r.take(true); len(text) > 0 {
			c.admit(render(text))
			if c.truncated {
				return
			}
		}
	}
}

// take removes and returns the residual's bytes. With carry, an incomplete trailing
// multibyte sequence stays behind as the start of the new residual.
func (r *residual) take(carry bool) []byte {
	if !carry || r.tail == 0 {
		out := r.buf
		*r = residual{}
		return out
	}
	n := len(r.buf) - r.tail
	out := r.buf[:n]
	*r = residual{buf: bytes.Clone(r.buf[n:]), cost: int64(r.need), tail: r.tail, need: r.need, lead: r.lead}
	return out
}

// step accounts for one more byte in the residual's cost, following the decoding of
// Go's for-range loop (utf8.DecodeRune): a valid sequence costs its width; every byte
// that does not begin a valid sequence renders as one U+FFFD (3 bytes).
func (r *residual) step(b byte) {
	if r.tail > 0 {
		if continues(r.lead, r.tail, b) {
			if r.tail++; r.tail == r.need {
				r.tail = 0 // complete: its width was already counted
			}
			return
		}
		r.cost += int64(3*r.tail - r.need) // the broken prefix: U+FFFD per byte
		r.tail = 0
	}
	switch n := seqLen(b); {
	case b < utf8.RuneSelf:
		r.cost += int64(asciiCost[b])
	case n > 1:
		r.tail, r.need, r.lead = 1, n, b
		r.cost += int64(n)
	default:
		r.cost += 3
	}
}

// continues reports whether b may be byte number pos (0-based, ≥ 1) of a valid
// sequence starting with lead: the second byte's range depends on the lead (no
// overlongs, no surrogates, nothing above U+10FFFF).
func continues(lead byte, pos int, b byte) bool {
	lo, hi := byte(0x80), byte(0xBF)
	if pos == 1 {
		switch lead {
		case 0xE0:
			lo = 0xA0
		case 0xED:
			hi = 0x9F
		case 0xF0:
			lo = 0x90
		case 0xF4:
			hi = 0x8F
		}
	}
	return b >= lo && b <= hi
}

// render decodes raw output with per-byte replacement: every byte that does not
// begin a valid UTF-8 sequence becomes one U+FFFD (not strings.ToValidUTF8, which
// collapses runs of bad bytes and would under-bill them).
func render(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	out := make([]byte, 0, len(p)+len(p)/2)
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	return string(out)
}
