package session

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// Read sizes: fd 3 carries frames up to 64 MiB; a pipe holds 64 KiB.
const (
	readSize  = 256 << 10
	straySize = 64 << 10
)

// Read buffers are reused across runs (384 KiB a run otherwise): nothing keeps
// a slice of one once its reader returns — frames and stray bytes are decoded
// or copied before the next read.
var (
	readBufs  = sync.Pool{New: func() any { b := make([]byte, readSize); return &b }}
	strayBufs = sync.Pool{New: func() any { b := make([]byte, straySize); return &b }}
)

// ---- fd-3 reader ------------------------------------------------------------

// route is where a child's readers deliver. A fresh run's readers serve
// that run alone; a persistent session's serve its child's whole life and
// deliver to the session's current run, or to the session between runs.
type route interface {
	// current is the run the child's output belongs to now; nil between
	// the runs of a session.
	current() *Run
	// between is told of fd-3 data that arrived while no run was current.
	between()
	// streamEnded records that descriptor fd reached end of stream and tells the
	// current run.
	streamEnded(fd int)
	// recoverPanic turns a panic in a reader into a failure of the run or
	// session.
	recoverPanic(where string)
}

func (r *Run) current() *Run      { return r }
func (r *Run) between()           {} // never: a fresh run is always current
func (r *Run) streamEnded(fd int) { r.markEOF(fd) }

// feed hands one read's frames to the current run and reports whether the
// rest of the stream must be dropped (a frame over the cap decided the run),
// and the call work its frames lent the reader (lend.go), if any. Frames may
// alias data: each is handled (and whatever is kept of it copied by the
// decoder) before the next Read.
func feed(rt route, framer *wireguard.Framer, data []byte) (discard bool, work func()) {
	r := rt.current()
	switch {
	case r == nil:
		rt.between()
		return false, nil
	case r.isDecided():
		return false, nil
	}
	r.lent.begin()
	defer func() { work = r.lent.end() }()
	lines, ferr := framer.FeedLines(data)
	for _, line := range lines {
		if line.Refused {
			r.refuseFrame(line.Bytes)
		} else {
			r.handleFrame(line.Bytes)
		}
		r.out.deliverQueued(false) // before the next frame can decide
	}
	if len(lines) > 0 {
		r.out.flush() // the client writes one read's deliveries together
	}
	if ferr != nil {
		r.decide(decision{err: workerExit(protocol.MsgFrameTooLong)})
		return true, nil
	}
	return false, nil
}

// newFrameReader is the Framer of a child's fd-3 reader: it holds a long
// frame only as far as the current run may still use it (frameRoom).
func newFrameReader(rt route) *wireguard.Framer {
	return wireguard.NewBoundedFramer(protocol.FrameCap, protocol.FrameProbe, func(head []byte) int {
		if r := rt.current(); r != nil {
			return r.frameRoom(head)
		}
		return 0 // between runs nothing is fed
	})
}

// frameRoom is how many bytes a frame longer than protocol.FrameProbe may take
// (docs/child-protocol-wire.md §2.4 step 2), judged on its declared type (head is
// its first bytes): a log frame what is left of the ledger, an output frame
// what is left of the outputs budget (base64 at 4/3), a done frame
// maxValueBytes (the child meters its value and caps its message to it), a
// call frame the frame cap (arguments have no budget), and each of them the
// probe on top for its envelope; any other frame, the probe alone.
func (r *Run) frameRoom(head []byte) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var room int64
	switch wireguard.DeclaredType(head) {
	case protocol.FrameLog:
		room = r.sm.capture.Remaining()
	case protocol.FrameOutput:
		left := r.sm.outs.budget.left()
		room = left + left/3
	case protocol.FrameDone:
		room = r.sm.lim.MaxValueBytes
	case protocol.FrameCall:
		return protocol.FrameCap
	}
	return int(min(room, protocol.FrameCap) + protocol.FrameProbe)
}

// refuseFrame takes a frame the reader refused for being longer than its room
// (frameRoom; head is its first bytes) as the budget it was judged against
// says of one that does not fit: a log frame truncates the ledger, an output
// frame the outputs budget, a done frame decides output-limit; any other is
// junk, dropped.
func (r *Run) refuseFrame(head []byte) {
	if r.isDecided() {
		return
	}
	switch t := wireguard.DeclaredType(head); t {
	case protocol.FrameLog:
		r.dispatch(event{kind: evLog, frame: wireguard.Frame{Type: t, Truncated: true}})
	case protocol.FrameOutput:
		r.dispatch(event{kind: evOutput, frame: wireguard.Frame{Type: t, Truncated: true}})
	case protocol.FrameDone:
		r.decide(decision{done: true, err: &protocol.RunError{Kind: protocol.KindOutputLimit, Message: outputLimitMessage(r.sm.lim.MaxValueBytes)}})
	}
}

// markEOF records end of stream on one of the three descriptors.
func (r *Run) markEOF(fd int) {
	r.dispatch(event{kind: evEOF, fd: fd})
	r.out.flush()
}

// handleFrame processes one complete fd-3 line (docs/child-protocol-wire.md §2.4 step 3, docs/child-protocol-wire.md §2.5).
func (r *Run) handleFrame(line []byte) {
	if r.isDecided() {
		return
	}
	f, ok := wireguard.DecodeFrame(line)
	if !ok {
		return
	}
	switch f.Type {
	case protocol.FrameBootAck:
		r.dispatch(event{kind: evBootAck})
	case protocol.FrameLog:
		r.dispatch(event{kind: evLog, frame: f})
	case protocol.FrameCall:
		r.dispatch(event{kind: evCall, frame: f, refusal: r.refuseArgs(f)})
	case protocol.FrameDone:
		r.decide(doneDecision(f, r.sm.lim.MaxValueBytes))
	case protocol.FrameOutput:
		r.dispatch(event{kind: evOutput, frame: f})
	}
}

// doneDecision is the decision a done frame carries (docs/child-protocol-wire.md §2.8).
func doneDecision(f wireguard.Frame, mvb int64) decision {
	d := decision{done: true}
	switch {
	case f.Error != nil:
		msg := f.Error.Message
		// The budget message is the daemon's own wording for this run's
		// limit (docs/child-protocol-wire.md §2.8 step 3, uncapped); TEST-CATALOGUE.md C65 pins it exactly
		// even when maxValueBytes is below its length. Everything else is
		// capped (docs/child-protocol-daemon.md §4.7).
		if f.Error.Kind != protocol.KindOutputLimit || msg != outputLimitMessage(mvb) {
			msg = wireguard.CapMessage(msg, mvb)
		}
		d.err = &protocol.RunError{
			Kind:          f.Error.Kind,
			Message:       msg,
			ExceptionType: f.Error.ExceptionType,
			Line:          f.Error.Line,
			Path:          f.Error.Path,
			Hint:          f.Error.Hint,
		}
	case !f.HasValue:
		// success without a value
	default:
		canonical, verdict := wireguard.CheckValue(f.Value, mvb)
		switch verdict {
		case wireguard.VerdictOverBudget:
			d.err = &protocol.RunError{Kind: protocol.KindOutputLimit, Message: outputLimitMessage(mvb)}
		case wireguard.VerdictNonLossless:
			d.err = &protocol.RunError{Kind: protocol.KindInvalidOutput, Message: protocol.MsgNonLossless}
		default:
			d.value, d.hasValue = canonical, true
		}
	}
	return d
}

func outputLimitMessage(maxValueBytes int64) string {
	return "completion value exceeded " + strconv.FormatInt(maxValueBytes, 10) + " bytes"
}

// ---- replies and the fd-3 writer ---------------------------------------------

// reply hands one reply frame to the writer; a full reply queue decides the
// run (docs/child-protocol-wire.md §2.9).
func (r *Run) reply(wr *fdWriter, frame []byte) {
	if wr != nil && !wr.reply(frame) {
		r.decide(decision{err: workerExit(protocol.MsgReplyQueueFull)})
	}
}

// answer receives the client's answer to one call (any goroutine, at most once).
func (r *Run) answer(c *call, a Answer) {
	defer r.recoverPanic("binding answer")
	eff := r.dispatch(event{kind: evAnswered, c: c})
	if !eff.ok {
		return
	}
	frame, mismatch := judgeAnswer(c.id, a, c.check) // judged outside the lock: may scan 64 MiB
	if mismatch != nil {
		frame = replyErr(c.id, r.resultMismatch(c, mismatch))
	}
	r.reply(eff.wr, frame)
}

// refuseArgs checks a call's arguments against its typed function's
// parameters (docs/protocol-typed.md §10.3) on the reader, outside the run's lock: the
// TypeError message when they break it, else "". known is fixed at creation,
// so it is read without the lock.
func (r *Run) refuseArgs(f wireguard.Frame) string {
	check := r.sm.known[f.Global][f.Name]
	if check == nil {
		return ""
	}
	err := check.CheckArgs(f.Args)
	if err == nil {
		return ""
	}
	msg := f.Global + "." + f.Name + "(): invalid arguments: " + oneLine(err)
	return wireguard.CapMessage(msg, r.sm.lim.MaxValueBytes)
}

// resultMismatch is the failure message for a host result that broke the
// declared returns schema; the daemon logs it at warn level, since it is the
// host's bug, not the program's.
func (r *Run) resultMismatch(c *call, err error) string {
	r.m.log.Warn("binding result does not match its declared returns schema",
		"runId", r.id, "namespace", c.global, "function", c.name, "problems", oneLine(err))
	msg := c.global + "." + c.name + "(): the host's result did not match the declared returns schema: " + oneLine(err)
	return wireguard.CapMessage(msg, r.sm.lim.MaxValueBytes)
}

// oneLine joins a check error's failing locations (one per line) with "; ".
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// writeLoop runs the child's writer (fdWriter.loop); the warm wall clock
// starts at the boot write, and a failed boot or run write decides the run.
// It is released at the decision (stop + an expired write deadline) even when
// blocked on a full socket.
func (r *Run) writeLoop(w *worker, wr *fdWriter, done chan struct{}) {
	defer close(done)
	defer r.recoverPanic("fd-3 writer")
	fail := wr.loop(func() { r.dispatch(event{kind: evBootWritten, w: w}) })
	if fail != nil {
		r.dispatch(event{kind: evWriteFailed, w: w, fail: fail})
	}
}

// ---- stray output -------------------------------------------------------------

// strayLoop reads native fd 1 or fd 2 into the ledger until end of stream;
// capture continues after the decision until the pipes end or are abandoned.
func strayLoop(rt route, fd int, f *os.File) {
	defer rt.recoverPanic("stray reader")
	defer rt.streamEnded(fd)
	bp := strayBufs.Get().(*[]byte)
	defer strayBufs.Put(bp)
	buf := *bp
	for {
		n, err := f.Read(buf)
		if r := rt.current(); n > 0 && r != nil { // a session drops what comes between runs
			r.dispatch(event{kind: evStray, fd: fd, data: buf[:n]})
			r.out.flush()
		}
		if err != nil {
			return
		}
	}
}

// ---- the outbox's sink: ordered client delivery ---------------------------------

func (r *Run) deliverLog(ev protocol.LogEvent) { r.client.Log(r.id, ev) }

func (r *Run) flushClient() { r.client.Flush() }

// deliverResult hands the result over, after the outputs marker its files
// caused (if any): run/output is flushed before the result is written.
func (r *Run) deliverResult(res protocol.Result) {
	if ev := r.lateMarker; ev != nil {
		r.deliverOutput(*ev)
		r.client.Flush()
	}
	r.onResult(res)
}

// deliveryPanicked: a panic in a client callback becomes the run's worker-exit.
func (r *Run) deliveryPanicked(v any) {
	r.log.Error("panic in a client callback", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	r.decide(decision{err: workerExit(fmt.Sprintf("internal daemon error (client delivery): %v", v))})
}

// deliverCall sends one binding/call; a decision reached meanwhile cancels it.
func (r *Run) deliverCall(c *call) {
	if !r.dispatch(event{kind: evCallSent, c: c}).ok {
		return
	}
	cancel := r.callClient(c, func(a Answer) { r.answer(c, a) })
	c.args = nil // sent: a call waiting on the client holds no arguments (up to 1024 of them)
	if r.dispatch(event{kind: evCallCancel, c: c, cancel: cancel}).ok {
		cancel()
	}
}
