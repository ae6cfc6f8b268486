package session

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// The fd-3 reader lends its goroutine to a binding call whose work runs in
// this process (bench/history-2026-12.md §12): once a read's frames are handled,
// the goroutine that read the call runs it, and reads on when it is done. A
// call that outlasts readPause hands reading to another goroutine, so fd 3 is
// never left unread for longer than that. A short call thus costs no
// goroutine hand-off at all: on a machine with few cores, waking a second
// goroutine (and the thread that runs it) beside the call delays the call,
// the child and the upstream server more than the hand-off itself costs. A
// goroutine that handed reading over waits a while for its next turn, so the
// deep call path's stack is grown once, not per call.

// LendingClient is a Client that does some binding calls' work in this process
// (mcp/upstream's routes). CallBindingLent is CallBinding, except that the
// client may hand the call's work to lend instead of starting it: lend reports
// whether it took the work, which then runs exactly once, on the goroutine that
// read the call frame, after the read's other frames were handled. When lend
// reports false the client runs the work as CallBinding would.
type LendingClient interface {
	Client
	CallBindingLent(runID, namespace, function string, args []byte, answer func(Answer), lend func(work func()) bool) (cancel func())
}

// lendSlot is where a run's call work waits for the fd-3 reader: open while
// the reader handles one read's frames, holding at most one piece of work.
// Only the reader's frames make calls, and the reader's own delivery returns
// only once every call its frames made was delivered (by it, or by a
// goroutine that was draining the outbox meanwhile), so work lent in the
// window is always taken by the reader when it closes the window.
type lendSlot struct {
	mu   sync.Mutex
	open bool
	work func()
}

func (s *lendSlot) begin() {
	s.mu.Lock()
	s.open = true
	s.mu.Unlock()
}

// lend takes work when the window is open and empty.
func (s *lendSlot) lend(work func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open || s.work != nil {
		return false
	}
	s.work = work
	return true
}

// end closes the window and returns the work lent in it, if any.
func (s *lendSlot) end() func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.work
	s.open, s.work = false, nil
	return w
}

// readPause is how long a lent call may keep fd 3 unread; readerIdle is how
// long a goroutine that handed reading over waits for its next turn before it
// exits.
const (
	readPause  = 2 * time.Millisecond
	readerIdle = 50 * time.Millisecond
)

// fdReader is one child's fd-3 reading state, passed from goroutine to
// goroutine: only the goroutine whose turn it is touches it. The turn can
// pass through late alone: a goroutine whose lent call ended keeps reading
// when its Stop finds the timer pending, even when another goroutine's Reset
// armed it (each Reset is withdrawn once, by the firing or by one Stop). The
// timer's lock orders that, but the race detector sees no edge from a Reset
// to a Stop; reading holds mu, which makes the order visible to it.
type fdReader struct {
	mu      sync.Mutex // held while reading and handling frames
	w       *worker
	rt      route
	framer  *wireguard.Framer
	bp      *[]byte
	discard bool          // a frame over the cap decided the run: drop the rest
	turn    chan struct{} // hands reading to a goroutine waiting for its turn
	late    *time.Timer   // armed while a lent call runs: hands reading over
}

// readLoop reads fd 3 until end of stream: frames through the Framer, each
// processed (and its client deliveries made) in order. After the decision
// the data is read and dropped so that end of stream is still observed.
func readLoop(w *worker, rt route) {
	rd := &fdReader{w: w, rt: rt, framer: newFrameReader(rt),
		bp: readBufs.Get().(*[]byte), turn: make(chan struct{})}
	// Armed by runLent only: made with a duration it cannot reach before
	// the Stop, so it never fires here.
	rd.late = time.AfterFunc(time.Hour, rd.handOver)
	rd.late.Stop()
	rd.serve()
}

// serve reads until end of stream, running the calls its reads lend it; one
// that outlasted readPause leaves it without the reading turn, and it waits
// for the turn to come back.
func (rd *fdReader) serve() {
	for {
		work, more := rd.read()
		switch {
		case work == nil:
			return
		case !more:
			work()
			return
		case !rd.runLent(work) && !rd.awaitTurn():
			return
		}
	}
}

// runLent runs work and reports whether this goroutine still has the reading
// turn: it loses it when work outlasts readPause (late fired: another
// goroutine reads meanwhile).
func (rd *fdReader) runLent(work func()) (kept bool) {
	rd.late.Reset(readPause)
	work()
	return rd.late.Stop()
}

// handOver gives reading to a goroutine waiting for its turn, or a new one.
func (rd *fdReader) handOver() {
	select {
	case rd.turn <- struct{}{}:
	default:
		go rd.serve()
	}
}

func (rd *fdReader) awaitTurn() bool {
	idle := time.NewTimer(readerIdle)
	defer idle.Stop()
	select {
	case <-rd.turn:
		return true
	case <-idle.C:
		return false
	}
}

// read reads until a read lends a call's work (more: the stream goes on, and
// the caller runs the work before it reads again) or the stream ends (the
// reading state is released; work is what its last read lent, if anything).
func (rd *fdReader) read() (work func(), more bool) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	defer rd.rt.recoverPanic("fd-3 reader")
	defer func() {
		if !more {
			rd.end()
		}
	}()
	buf := *rd.bp
	for {
		n, err := rd.w.conn.Read(buf)
		if n > 0 && !rd.discard {
			rd.discard, work = feed(rd.rt, rd.framer, buf[:n])
		}
		if err != nil {
			if r := rd.rt.current(); !errors.Is(err, io.EOF) && r != nil && !r.isDecided() {
				r.log.Debug("fd-3 read error", "err", err)
			}
			return work, false
		}
		if work != nil {
			return work, true
		}
	}
}

// end releases the reading state and reports the end of the stream.
func (rd *fdReader) end() {
	rd.framer.Release()
	readBufs.Put(rd.bp)
	rd.rt.streamEnded(fdConn)
}

// callClient sends call c to the client, lending it the reader's goroutine
// when the client can take it.
func (r *Run) callClient(c *call, answer func(Answer)) (cancel func()) {
	if lc, ok := r.client.(LendingClient); ok {
		return lc.CallBindingLent(r.id, c.global, c.name, c.args, answer, r.lent.lend)
	}
	return r.client.CallBinding(r.id, c.global, c.name, c.args, answer)
}
