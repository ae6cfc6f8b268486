package session

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"

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

// readLoop reads fd 3 until end of stream: frames through the Framer, each
// processed (and its client deliveries flushed) in order. After the decision
// the data is read and dropped so that end of stream is still observed.
func (r *Run) readLoop(w *worker) {
	defer r.recoverPanic("fd-3 reader")
	defer r.markEOF(fdConn)
	framer := wireguard.NewFramer(protocol.FrameCap)
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	discard := false
	for {
		n, err := w.conn.Read(buf)
		if n > 0 && !discard && !r.isDecided() {
			// Frames may alias buf: each is handled (and whatever is kept
			// of it copied by the decoder) before the next Read.
			frames, ferr := framer.Feed(buf[:n])
			for _, line := range frames {
				r.handleFrame(line)
				r.deliverQueued(false) // before the next frame can decide
			}
			if len(frames) > 0 {
				r.flush() // the client writes one read's deliveries together
			}
			if ferr != nil {
				discard, framer = true, nil // drop the held partial frame
				r.decide(decision{err: workerExit(protocol.MsgFrameTooLong)})
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !r.isDecided() {
				r.log.Debug("fd-3 read error", "err", err)
			}
			return
		}
	}
}

func (r *Run) isDecided() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.decided
}

// markEOF records end of stream on one of the three descriptors.
func (r *Run) markEOF(fd int) {
	var eff effects
	func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.eof[fd] = true
		r.admitStrayTailsLocked()
		eff = r.checkCloseLocked()
	}()
	eff.run()
	r.flush()
}

// admitStrayTailsLocked admits the newline-free tail of each stray pipe that
// has ended, but only once fd 3 has ended too: every frame the child wrote
// before exiting (a truncation marker above all) is then already processed,
// so a tail written after it cannot slip in ahead of it (C152).
func (r *Run) admitStrayTailsLocked() {
	if !r.eof[fdConn] || r.settled || r.abandoned {
		return
	}
	for _, fd := range []int{fdStdout, fdStderr} {
		if r.eof[fd] && !r.tailAdmitted[fd] {
			r.tailAdmitted[fd] = true
			r.capture.StrayEOF(fd)
		}
	}
}

// handleFrame processes one complete fd-3 line (§2.4 step 3, §2.5).
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
		r.onBootAck()
	case protocol.FrameLog:
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.decided {
			r.capture.Log(f.Text, f.Open, f.Truncated)
		}
	case protocol.FrameCall:
		r.onCall(f)
	case protocol.FrameDone:
		r.onDone(f)
	}
}

// onBootAck queues the run frame on the first boot-ack (§2.3 step 4).
func (r *Run) onBootAck() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.decided || r.bootAcked {
		return
	}
	r.bootAcked = true
	r.wRun = runFrame(r.p.Program)
	r.wcond.Broadcast()
}

// onCall: strict id sequence, dispatch, backlog cap (§2.9).
func (r *Run) onCall(f wireguard.Frame) {
	var eff effects
	var id int64
	accepted, unknown := func() (bool, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.decided || f.ID != float64(r.nextID) {
			return false, false
		}
		id = r.nextID
		r.nextID++
		if !r.known[f.Global][f.Name] {
			return true, true
		}
		if r.inflight >= protocol.CallBacklog {
			eff = r.decideLocked(decision{err: workerExit(protocol.MsgCallBacklog)})
			return true, false
		}
		r.inflight++
		c := &call{id: id, global: f.Global, name: f.Name, args: f.Args}
		r.calls[id] = c
		r.out = append(r.out, outItem{call: c})
		return true, false
	}()
	eff.run()
	if !accepted || !unknown {
		return
	}
	msg := unknownBindingMessage(f.Global, f.Name, r.lim.MaxValueBytes)
	frame := replyErr(id, msg)
	r.mu.Lock()
	eff = r.queueReplyLocked(frame)
	r.mu.Unlock()
	eff.run()
}

// onDone decides the run from a done frame (§2.8).
func (r *Run) onDone(f wireguard.Frame) {
	var d decision
	mvb := r.lim.MaxValueBytes
	switch {
	case f.Error != nil:
		msg := f.Error.Message
		// The budget message is the daemon's own wording for this run's
		// limit (§2.8 step 3, uncapped); TEST-CATALOGUE C65 pins it exactly
		// even when maxValueBytes is below its length. Everything else is
		// capped (§4.7).
		if f.Error.Kind != protocol.KindOutputLimit || msg != outputLimitMessage(mvb) {
			msg = wireguard.CapMessage(msg, mvb)
		}
		d.err = &protocol.RunError{
			Kind:          f.Error.Kind,
			Message:       msg,
			ExceptionType: f.Error.ExceptionType,
			Line:          f.Error.Line,
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
	r.decide(d)
}

// ---- replies and the fd-3 writer ---------------------------------------------
//
// Frames reach fd 3 in order: boot, run (on the first boot-ack), then replies
// FIFO, and at most one goroutine writes at a time (it holds wbusy). A reply
// that finds fd 3 idle is written at once by the goroutine that produced it,
// with one non-blocking write(2): no hand-off to the writer goroutine on the
// common path. The writer goroutine writes the boot and run frames, whatever a
// full socket did not take, and every reply queued behind it.

// queueReplyLocked writes one reply frame now if fd 3 is idle (the returned
// effect), else queues it for the writer (cap 1024 waiting).
func (r *Run) queueReplyLocked(frame []byte) effects {
	if r.decided || r.wdead {
		return nil
	}
	if r.writerIdleLocked() {
		r.wbusy = true
		return effects{func() { r.writeNow(frame) }}
	}
	if len(r.wq) >= protocol.ReplyQueue {
		return r.decideLocked(decision{err: workerExit(protocol.MsgReplyQueueFull)})
	}
	r.wq = append(r.wq, frame)
	r.wcond.Signal()
	return nil
}

// writerIdleLocked: nothing is being written to fd 3 and nothing waits.
func (r *Run) writerIdleLocked() bool {
	return !r.wbusy && !r.wstop && r.raw != nil &&
		r.wBoot == nil && r.wRun == nil && r.wRest == nil && len(r.wq) == 0
}

// writeNow makes one non-blocking write of frame (the caller set wbusy) and
// leaves what the socket did not take to the writer goroutine, which finishes
// it before anything else (or meets the write error and handles it).
func (r *Run) writeNow(frame []byte) {
	n := 0
	_ = r.raw.Write(func(fd uintptr) bool {
		n, _ = syscall.Write(int(fd), frame)
		return true // never wait for the socket here
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wbusy = false
	if n = max(n, 0); n < len(frame) && !r.wstop && !r.wdead {
		r.wRest = frame[n:]
	}
	if r.wRest != nil || len(r.wq) > 0 {
		r.wcond.Signal()
	}
}

// answer receives the client's answer to one call (any goroutine, at most once).
func (r *Run) answer(c *call, a Answer) {
	defer r.recoverPanic("binding answer")
	live := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.decided || c.answered || r.calls[c.id] != c {
			return false
		}
		c.answered = true
		delete(r.calls, c.id)
		r.inflight--
		return true
	}()
	if !live {
		return
	}
	frame := judgeAnswer(c.id, a) // outside the lock: may scan 64 MiB
	var eff effects
	func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		eff = r.queueReplyLocked(frame)
	}()
	eff.run()
}

// writeLoop is the run's writer goroutine (see above). It is released at the
// decision (wstop + an expired write deadline) even when blocked on a full
// socket.
func (r *Run) writeLoop(w *worker) {
	defer close(w.writerDone)
	defer r.recoverPanic("fd-3 writer")
	for {
		frame, boot := r.nextWrite()
		if frame == nil {
			return
		}
		if _, err := w.conn.Write(frame); err != nil {
			r.mu.Lock()
			r.wdead = true
			r.wq, r.wRest = nil, nil
			stopped := r.wstop
			r.mu.Unlock()
			if boot && !stopped {
				r.decide(decision{err: workerExit("failed to boot python subprocess: " + err.Error()), lost: true})
			}
			return
		}
		r.mu.Lock()
		r.wbusy = false
		r.mu.Unlock()
	}
}

// nextWrite blocks until a frame is due and fd 3 is free (the rest of a cut
// reply, boot, run, then the queue) or the writer stops; it sets wbusy. The
// rest of a cut reply goes first: a run frame queued meanwhile (a forged call
// answered before boot-ack) must not land inside it.
func (r *Run) nextWrite() (frame []byte, boot bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for !r.wstop && (r.wbusy || r.wBoot == nil && r.wRun == nil && r.wRest == nil && len(r.wq) == 0) {
		r.wcond.Wait()
	}
	if r.wstop {
		return nil, false
	}
	r.wbusy = true
	switch {
	case r.wRest != nil:
		frame, r.wRest = r.wRest, nil
		return frame, false
	case r.wBoot != nil:
		frame, r.wBoot = r.wBoot, nil
		if r.w.warm {
			r.armWallLocked() // warm: the wall clock starts at the boot write
		}
		return frame, true
	case r.wRun != nil:
		frame, r.wRun = r.wRun, nil
		return frame, true
	}
	frame = r.wq[0]
	r.wq[0] = nil
	r.wq = r.wq[1:]
	return frame, false
}

// ---- stray output -------------------------------------------------------------

// strayLoop reads native fd 1 or fd 2 into the ledger until end of stream;
// capture continues after the decision until the pipes end or are abandoned.
func (r *Run) strayLoop(w *worker, fd int, f *os.File) {
	defer r.recoverPanic("stray reader")
	defer r.markEOF(fd)
	bp := strayBufs.Get().(*[]byte)
	defer strayBufs.Put(bp)
	buf := *bp
	for {
		n, err := f.Read(buf)
		if n > 0 {
			func() {
				r.mu.Lock()
				defer r.mu.Unlock()
				if !r.settled && !r.abandoned {
					r.capture.Stray(fd, buf[:n])
				}
			}()
			r.flush()
		}
		if err != nil {
			return
		}
	}
}

// ---- ordered client delivery ------------------------------------------------

// flushClient has the client write out what it buffered (Client.Flush).
func (r *Run) flushClient() { r.client.Flush() }

// flush delivers queued outbox items in order, then has the client write out
// what it buffered.
func (r *Run) flush() { r.deliverQueued(true) }

// deliverQueued delivers queued outbox items in order; push ends with the
// client's Flush (the fd-3 reader delivers each frame's items without it and
// pushes once per read). Any goroutine may call it; the sendMu hand-off keeps
// deliveries ordered and none is lost. A panic in a client callback becomes
// the run's worker-exit; the item that panicked is dropped and delivery goes
// on (the result is always delivered).
func (r *Run) deliverQueued(push bool) {
	for !r.deliverOnce(push) {
	}
}

func (r *Run) deliverOnce(push bool) (done bool) {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("panic in a client callback", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			r.decide(decision{err: workerExit(fmt.Sprintf("internal daemon error (client delivery): %v", v))})
			done = false
		}
	}()
	r.drain(push)
	return true
}

func (r *Run) drain(push bool) {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if push {
		defer r.flushClient()
	}
	for {
		it, ok := r.popOut()
		if !ok {
			return
		}
		r.deliver(it)
	}
}

func (r *Run) popOut() (outItem, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.out) == 0 {
		return outItem{}, false
	}
	it := r.out[0]
	r.out[0] = outItem{}
	r.out = r.out[1:]
	if len(r.out) == 0 {
		r.out = nil
	}
	return it, true
}

func (r *Run) deliver(it outItem) {
	switch {
	case it.ev != nil:
		r.client.Log(r.id, *it.ev)
	case it.call != nil:
		r.deliverCall(it.call)
	case it.cancels != nil:
		for _, cancel := range it.cancels {
			cancel()
		}
	case it.result != nil:
		defer close(r.delivered)
		r.flushClient()
		<-it.staged
		r.onResult(*it.result)
	}
}

// deliverCall sends one binding/call; a decision reached meanwhile cancels it.
func (r *Run) deliverCall(c *call) {
	send := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.decided {
			return false
		}
		r.bindingCalls++
		return true
	}()
	if !send {
		return
	}
	cancel := r.client.CallBinding(r.id, c.global, c.name, c.args, func(a Answer) { r.answer(c, a) })
	cancelNow := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if c.answered || cancel == nil {
			return false
		}
		if r.decided {
			return true
		}
		c.cancel = cancel
		return false
	}()
	if cancelNow {
		cancel()
	}
}

func outputLimitMessage(maxValueBytes int64) string {
	return "completion value exceeded " + strconv.FormatInt(maxValueBytes, 10) + " bytes"
}
