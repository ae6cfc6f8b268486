package wireguard

import (
	"bytes"
	"errors"
)

// ErrFrameTooLong reports a frame longer than the Framer's cap (docs/child-protocol-wire.md §2.4 step 2). It is
// sticky: once returned, every later Feed returns it again.
var ErrFrameTooLong = errors.New("wireguard: fd-3 frame exceeds the frame cap")

// Framer splits the fd-3 byte stream into JSON-lines frames (docs/child-protocol-wire.md §2.4). A frame is the
// bytes before a '\n'. Not safe for concurrent use.
//
// A frame that spans reads is assembled in a buffer of the Framer's own, taken from a
// small shared pool (frameBufs) and handed back as soon as it is free (or at Release),
// so a daemon that
// reads a megabyte frame every run reuses one buffer, already faulted in, instead of
// allocating, zeroing and faulting in a fresh one grown by doubling each time.
//
// A bounded Framer (NewBoundedFramer) also judges each frame longer than its probe
// before taking more of it: room, shown the frame's first probe bytes, says how many
// bytes the frame may take. A frame over its room is refused: it is read to its
// newline without being kept, and handed back as a Line with Refused set, in order
// with the others, carrying its first probe bytes only. So what a Framer holds is
// bounded by the room its owner grants, not by the cap.
type Framer struct {
	cap, probe int
	room       func(head []byte) int // nil: every frame may take cap bytes
	limit      int                   // the current frame's judged room; 0 until judged
	buf        []byte                // the current partial frame: always the Framer's own buffer, nil when empty
	lent       []byte                // the buffer of the frame that spanned into the last Feed, until the next Feed
	refused    []byte                // the head of the frame being drained, nil when none is
	drained    int                   // the length so far of the frame being drained
	lines      []Line                // FeedLines' result, reused by the next Feed
	frames     [][]byte              // Feed's result, reused by the next Feed
	err        error
}

// Line is one frame a bounded Framer split off: its bytes (valid as Feed's frames
// are), or, when Refused, a copy of its first probe bytes.
type Line struct {
	Bytes   []byte
	Refused bool
}

// NewFramer returns a Framer accepting frames of at most cap bytes (the daemon passes
// protocol.FrameCap; a frame of exactly cap bytes is accepted).
func NewFramer(cap int) *Framer { return &Framer{cap: max(cap, 0)} }

// NewBoundedFramer returns a Framer accepting frames of at most cap bytes that
// shows room the first probe bytes of every frame longer than probe and
// refuses one longer than the room it returns (at least probe, at most cap).
func NewBoundedFramer(cap, probe int, room func(head []byte) int) *Framer {
	cap = max(cap, 0)
	return &Framer{cap: cap, probe: min(max(probe, 1), cap), room: room}
}

// Feed consumes p and returns the frames it completes, in order. Every frame is valid
// only until the next Feed: one that lies whole in p is a sub-slice of p (and also
// only until the caller reuses p); one begun in an earlier Feed lies in the Framer's
// buffer, which the next Feed reuses. Capacity equals length, so appending to a frame
// cannot touch what follows it. A frame kept longer must be copied
// (docs/child-protocol.md Appendix B.12); the slice of frames is reused by the next
// Feed too, so a read costs no allocation. Empty lines are skipped, never returned.
//
// As soon as the current frame is known to be longer than cap — whether or not its
// newline has arrived — Feed returns ErrFrameTooLong together with the frames
// completed before it in p; nothing of the long frame is allocated beyond cap bytes.
// The trailing partial frame is kept as a copy (never p's memory) in a buffer that
// grows geometrically, so a frame delivered one byte per Feed costs O(frame) copying
// in total. A refused frame (bounded Framers only) is left out; FeedLines reports it.
func (f *Framer) Feed(p []byte) (frames [][]byte, err error) {
	lines, err := f.FeedLines(p)
	clear(f.frames) // drop the last read's frames: they may pin a freed buffer
	frames = f.frames[:0]
	for _, l := range lines {
		if !l.Refused {
			frames = append(frames, l.Bytes)
		}
	}
	f.frames = frames
	return frames, err
}

// FeedLines is Feed, with the frames a bounded Framer refused in their place.
func (f *Framer) FeedLines(p []byte) (lines []Line, err error) {
	f.lent = putFrameBuf(f.lent)
	clear(f.lines)
	lines = f.lines[:0]
	defer func() { f.lines = lines }()
	for f.err == nil && len(p) > 0 {
		if f.refused != nil {
			p, lines = f.drain(p, lines)
			continue
		}
		limit := f.frameLimit()
		room := limit - len(f.buf) // bytes the current frame may still take
		i := bytes.IndexByte(p[:min(len(p), room+1)], '\n')
		switch {
		case i >= 0:
			if frame := f.complete(p[:i]); frame != nil {
				lines = append(lines, Line{Bytes: frame})
			}
			f.limit = 0
			p = p[i+1:]
		case len(p) <= room:
			f.hold(p)
			p = nil
		case f.limit == 0 && limit < f.cap: // past the probe: judge it
			p = f.judge(p)
		case limit < f.cap: // past its room
			f.refuse(p[:room])
			p = p[room:]
		default:
			f.err, f.buf = ErrFrameTooLong, nil
		}
	}
	return lines, f.err
}

// frameLimit is how many bytes the current frame may take: its judged room, else
// the probe while it is unjudged (bounded Framers), else the cap.
func (f *Framer) frameLimit() int {
	switch {
	case f.limit > 0:
		return f.limit
	case f.room != nil:
		return f.probe
	}
	return f.cap
}

// judge shows room the first probe bytes of the current frame, which p makes
// longer than the probe, and records its limit; it returns what is left of p.
// A frame begun in an earlier Feed is first held up to the probe (head in the
// Framer's buffer); one that starts in p is judged where it lies.
func (f *Framer) judge(p []byte) []byte {
	var head []byte
	if len(f.buf) == 0 {
		head = p[:f.probe]
	} else {
		n := f.probe - len(f.buf)
		f.hold(p[:n])
		head, p = f.buf, p[n:]
	}
	f.limit = min(max(f.room(head), f.probe), f.cap)
	return p
}

// refuse starts draining the current frame, of which tail (the rest of its
// room) is the last part seen: its head is kept as a copy, its buffer freed.
func (f *Framer) refuse(tail []byte) {
	head := f.buf
	if len(head) == 0 {
		head = tail
	}
	f.refused = bytes.Clone(head[:f.probe])
	f.drained = len(f.buf) + len(tail)
	f.buf, f.limit = putFrameBuf(f.buf), 0
}

// drain reads the refused frame on to its newline without keeping it, and
// then appends it to lines; past the cap it is ErrFrameTooLong like any frame.
func (f *Framer) drain(p []byte, lines []Line) ([]byte, []Line) {
	left := f.cap - f.drained
	i := bytes.IndexByte(p[:min(len(p), left+1)], '\n')
	switch {
	case i >= 0:
		lines = append(lines, Line{Bytes: f.refused, Refused: true})
		f.refused, f.drained = nil, 0
		return p[i+1:], lines
	case len(p) > left:
		f.err, f.refused = ErrFrameTooLong, nil
		return nil, lines
	}
	f.drained += len(p)
	return nil, lines
}

// Release hands the Framer's buffers back to the pool once its reader is done with it
// (end of stream): no frame it returned may be used afterwards. A Framer fed again after
// Release takes buffers anew.
func (f *Framer) Release() {
	f.refused, f.limit, f.lines, f.frames = nil, 0, nil, nil
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
