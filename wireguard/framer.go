package wireguard

import (
	"bytes"
	"errors"
)

// ErrFrameTooLong reports a frame longer than the Framer's cap (docs/child-protocol.md §2.4 step 2). It is
// sticky: once returned, every later Feed returns it again.
var ErrFrameTooLong = errors.New("wireguard: fd-3 frame exceeds the frame cap")

// Framer splits the fd-3 byte stream into JSON-lines frames (docs/child-protocol.md §2.4). A frame is the
// bytes before a '\n'. Not safe for concurrent use.
type Framer struct {
	cap int
	buf []byte // the current partial frame: always our own allocation, nil when empty
	err error
}

// NewFramer returns a Framer accepting frames of at most cap bytes (the daemon passes
// protocol.FrameCap; a frame of exactly cap bytes is accepted).
func NewFramer(cap int) *Framer { return &Framer{cap: max(cap, 0)} }

// Feed consumes p and returns the frames it completes, in order. A frame that lies
// whole in p is a sub-slice of p (capacity = length, so appending to it cannot touch
// p) and is valid only until the caller reuses p: a frame kept longer must be copied
// (docs/child-protocol.md Appendix B.12). A frame begun in an earlier Feed is a fresh
// allocation (its backing array may be up to twice its length). Empty lines are
// skipped, never returned.
//
// As soon as the current frame is known to be longer than cap — whether or not its
// newline has arrived — Feed returns ErrFrameTooLong together with the frames
// completed before it in p; nothing of the long frame is allocated beyond cap bytes.
// The trailing partial frame is kept as a copy (never p's memory) and grows
// geometrically, so a frame delivered one byte per Feed costs O(frame) copying in
// total.
func (f *Framer) Feed(p []byte) (frames [][]byte, err error) {
	for f.err == nil && len(p) > 0 {
		room := f.cap - len(f.buf) // bytes the current frame may still take
		i := bytes.IndexByte(p[:min(len(p), room+1)], '\n')
		switch {
		case i >= 0:
			if frame := f.complete(p[:i]); frame != nil {
				frames = append(frames, frame)
			}
			p = p[i+1:]
		case len(p) > room:
			f.err, f.buf = ErrFrameTooLong, nil
		default:
			f.hold(p)
			p = nil
		}
	}
	return frames, f.err
}

// complete returns the current frame ended by tail (a sub-slice of the caller's p),
// or nil if it is empty, and resets the partial frame.
func (f *Framer) complete(tail []byte) []byte {
	n := len(f.buf) + len(tail)
	if n == 0 {
		return nil
	}
	if f.buf == nil {
		return tail[:n:n]
	}
	frame := append(f.grow(n), tail...)
	f.buf = nil
	return frame[:n:n]
}

// hold appends p to the partial frame.
func (f *Framer) hold(p []byte) {
	f.buf = append(f.grow(len(f.buf)+len(p)), p...)
}

// grow returns f.buf with capacity for n bytes (n never exceeds the cap).
func (f *Framer) grow(n int) []byte { return grow(f.buf, n, f.cap) }

// grow returns buf with capacity for n bytes, at least doubling when it reallocates
// (amortised-linear growth: append's gentler growth above 256 bytes copies more) but
// never beyond limit ≥ n.
func grow(buf []byte, n, limit int) []byte {
	if n <= cap(buf) {
		return buf
	}
	out := make([]byte, len(buf), min(max(n, 2*cap(buf)), limit))
	copy(out, buf)
	return out
}
