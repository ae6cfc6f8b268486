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
//
// A frame that spans reads is assembled in a buffer of the Framer's own, taken from a
// small shared pool (frameBufs) and handed back as soon as it is free (or at Release),
// so a daemon that
// reads a megabyte frame every run reuses one buffer, already faulted in, instead of
// allocating, zeroing and faulting in a fresh one grown by doubling each time.
type Framer struct {
	cap  int
	buf  []byte // the current partial frame: always the Framer's own buffer, nil when empty
	lent []byte // the buffer of the frame that spanned into the last Feed, until the next Feed
	err  error
}

// NewFramer returns a Framer accepting frames of at most cap bytes (the daemon passes
// protocol.FrameCap; a frame of exactly cap bytes is accepted).
func NewFramer(cap int) *Framer { return &Framer{cap: max(cap, 0)} }

// Feed consumes p and returns the frames it completes, in order. Every frame is valid
// only until the next Feed: one that lies whole in p is a sub-slice of p (and also
// only until the caller reuses p); one begun in an earlier Feed lies in the Framer's
// buffer, which the next Feed reuses. Capacity equals length, so appending to a frame
// cannot touch what follows it. A frame kept longer must be copied
// (docs/child-protocol.md Appendix B.12). Empty lines are skipped, never returned.
//
// As soon as the current frame is known to be longer than cap — whether or not its
// newline has arrived — Feed returns ErrFrameTooLong together with the frames
// completed before it in p; nothing of the long frame is allocated beyond cap bytes.
// The trailing partial frame is kept as a copy (never p's memory) in a buffer that
// grows geometrically, so a frame delivered one byte per Feed costs O(frame) copying
// in total.
func (f *Framer) Feed(p []byte) (frames [][]byte, err error) {
	f.lent = putFrameBuf(f.lent)
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

// Release hands the Framer's buffers back to the pool once its reader is done with it
// (end of stream): no frame it returned may be used afterwards. A Framer fed again after
// Release takes buffers anew.
func (f *Framer) Release() {
	f.lent = putFrameBuf(f.lent)
	f.buf = putFrameBuf(f.buf)
}

// complete returns the current frame ended by tail (a sub-slice of the caller's p),
// or nil if it is empty, and resets the partial frame. A frame assembled in the
// Framer's buffer lends that buffer until the next Feed.
func (f *Framer) complete(tail []byte) []byte {
	n := len(f.buf) + len(tail)
	if n == 0 {
		return nil
	}
	if f.buf == nil {
		return tail[:n:n]
	}
	frame := append(f.grow(n), tail...)
	f.buf, f.lent = nil, frame
	return frame[:n:n]
}

// hold appends p to the partial frame.
func (f *Framer) hold(p []byte) {
	f.buf = append(f.grow(len(f.buf)+len(p)), p...)
}

// grow returns f.buf with capacity for n bytes (n never exceeds the cap): a pooled
// buffer when one is large enough, else a fresh one (see grow).
func (f *Framer) grow(n int) []byte {
	if n <= cap(f.buf) {
		return f.buf
	}
	if b := getFrameBuf(n); b != nil {
		out := append(b, f.buf...)
		putFrameBuf(f.buf)
		return out
	}
	return grow(f.buf, max(n, min(minFrameBuf, f.cap)), f.cap)
}

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
