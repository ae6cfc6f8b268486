package rpc

import (
	"bufio"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coderun-rpc/coderun-rpc/wire"
)

// writer serialises every outbound message under one lock: each is a body
// encoded by encode.go, framed here with its Content-Length header (docs/protocol.md §2,
// Appendix B items 5, 16).
type writer struct {
	mu     sync.Mutex
	bw     *bufio.Writer
	failed bool
	log    *slog.Logger

	// dl is the output's deadline setter, when it has one (a pollable pipe
	// or socket); draining bounds every write from then on (see drain).
	dl       deadliner
	draining atomic.Bool

	// q, when set, takes every message and writes it from a goroutine of
	// its own (sendqueue.go); nil: the sender writes under mu (stdio).
	q *sendQueue
}

type deadliner interface{ SetWriteDeadline(time.Time) error }

// drainTimeout bounds each write once the daemon is tearing down because
// the client went away or a signal arrived: a client that stopped reading
// cannot keep the daemon alive (docs/protocol.md §2: never leave an orphan).
const drainTimeout = 2 * time.Second

// newWriter writes to w; with maxUnsent > 0 through a sendQueue of that
// bound and the shared budget (nil: none), which calls fellBehind when the
// client falls behind them.
func newWriter(w io.Writer, log *slog.Logger, maxUnsent int64, budget *UnsentBudget, fellBehind func()) *writer {
	dl, _ := w.(deadliner)
	wr := &writer{bw: bufio.NewWriterSize(w, 64<<10), log: log, dl: dl}
	if maxUnsent > 0 {
		wr.q = newSendQueue(wr, maxUnsent, budget, fellBehind)
	}
	return wr
}

// finish returns once every queued message is written or dropped (at once
// without a queue: writes are made by their senders).
func (w *writer) finish() {
	if w.q != nil {
		w.q.finish()
	}
}

// drain bounds the write in progress (if any) and every later one.
func (w *writer) drain() {
	if w.dl != nil && !w.draining.Swap(true) {
		_ = w.dl.SetWriteDeadline(time.Now().Add(drainTimeout))
	}
}

// bound renews the per-write deadline while draining (called under mu, or
// by the send queue's goroutine).
func (w *writer) bound() {
	if w.draining.Load() {
		_ = w.dl.SetWriteDeadline(time.Now().Add(drainTimeout))
	}
}

// frame writes one pre-encoded JSON body.
func (w *writer) frame(body []byte) { w.put(body, true) }

// buffer puts one pre-encoded JSON body into the buffer only: the next flush
// (or any message written meanwhile) writes it, so a burst of messages costs
// a few write(2)s instead of one each.
func (w *writer) buffer(body []byte) { w.put(body, false) }

func (w *writer) put(body []byte, flush bool) {
	w.body(len(body), func(bw *bufio.Writer) { bw.Write(body) }, flush)
}

// flush writes out what calls to buffer left in the buffer.
func (w *writer) flush() { w.body(-1, nil, true) }

// pieces writes one JSON body that emit produces piece by piece: a first pass
// (outside the lock) counts its bytes for the Content-Length, a second writes
// them through the buffer, so a large body is never held whole. emit must
// produce the same bytes in both passes and put must not keep its argument.
func (w *writer) pieces(emit func(put func([]byte))) {
	n := 0
	emit(func(p []byte) { n += len(p) })
	w.body(n, func(bw *bufio.Writer) { emit(func(p []byte) { bw.Write(p) }) }, true)
}

// body writes (under the lock) the header for n bytes and the n bytes write
// puts into the buffer (nothing when n < 0), then flushes if asked: one
// write(2) for everything buffered when it fits. A failed write is sticky in
// bufio.Writer, so the flush or a later one reports it.
//
// With a send queue the message is queued instead, and flushing is the
// queue's: it writes whatever it holds as soon as it can.
func (w *writer) body(n int, write func(*bufio.Writer), flush bool) {
	if w.q != nil {
		if n >= 0 {
			w.q.push(n, write)
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed {
		return
	}
	w.bound()
	if n >= 0 {
		w.header(n)
		write(w.bw)
	}
	if flush {
		w.check(w.bw.Flush())
	}
}

// header puts the Content-Length header for an n-byte body into the buffer.
func (w *writer) header(n int) {
	var hdr [40]byte
	w.bw.Write(append(strconv.AppendInt(append(hdr[:0], "Content-Length: "...), int64(n), 10), "\r\n\r\n"...))
}

func (w *writer) check(err error) {
	if err != nil {
		w.failed = true
		w.log.Warn("writing to the client failed; further output is dropped", "err", err)
	}
}

// reqID is a usable request id: its canonical JSON text, the key of every
// registry and what every response to it echoes.
type reqID struct{ text string }

// reply sends a response whose result holds no program value.
func (w *writer) reply(id reqID, result any) { w.frame(encodeResult(id.text, result)) }

// replyError sends an error response; id nil means "id": null.
func (w *writer) replyError(id *reqID, code int64, msg string) {
	text := "null"
	if id != nil {
		text = id.text
	}
	w.frame(wire.EncodeError(text, code, msg))
}
