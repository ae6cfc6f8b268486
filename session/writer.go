package session

import (
	"os"
	"sync"
	"syscall"
)

// fdWriter writes the daemon's frames to one child's fd 3, in order: boot,
// run (once sendRun is called, on the first boot-ack), then replies FIFO. At
// most one goroutine writes at a time (the one holding busy). A run frame or a
// reply that finds fd 3 idle is written at once by the goroutine that produced
// it, with one non-blocking write(2): no hand-off to the writer goroutine on
// the common path. The writer goroutine (loop) writes the boot frame, a run
// frame or reply that found fd 3 busy, whatever a full socket did not take,
// and every reply queued behind it.
//
// fdWriter owns its synchronisation (mu); it never calls out while holding
// it, so a caller may hold its own lock (the run's) while calling sendRun,
// reply or stop. One fdWriter serves one child: a run moved to a fresh child
// gets a fresh writer.
type fdWriter struct {
	conn *os.File        // fd 3; a write deadline releases a blocked loop
	raw  syscall.RawConn // conn for non-blocking writes; nil when unavailable
	cap  int             // replies that may wait (protocol.ReplyQueue)

	mu      sync.Mutex
	cond    sync.Cond // signalled when a frame is due or the writer stops
	boot    []byte    // the boot frame until the loop takes it
	run     []byte    // the run frame until the loop takes it
	rest    []byte    // the unwritten tail of a frame cut short by a full socket
	restRun bool      // rest is the run frame's (its failure is the handshake's)
	q       [][]byte  // replies waiting
	busy    bool      // a goroutine is writing to fd 3
	stopped bool      // stop was called: nothing more is written
	dead    bool      // a write failed: nothing more is written
}

func newFDWriter(conn *os.File, boot []byte, queueCap int) *fdWriter {
	wr := &fdWriter{conn: conn, boot: boot, cap: queueCap}
	wr.cond.L = &wr.mu
	if raw, err := conn.SyscallConn(); err == nil {
		wr.raw = raw
	}
	return wr
}

// sendRun writes the run frame now if fd 3 is idle, else queues it (ahead of
// any reply still waiting). A stopped writer never writes it.
func (wr *fdWriter) sendRun(frame []byte) {
	wr.mu.Lock()
	if wr.idleLocked() {
		wr.busy = true
		wr.mu.Unlock()
		wr.writeNow(frame, true)
		return
	}
	defer wr.mu.Unlock()
	wr.run = frame
	wr.cond.Broadcast()
}

// stop ends the writer: nothing more is written but the rest of a frame
// already begun (a session child reads its fd 3 again for the next run, so a
// cut frame must not be left on it), and the loop returns once that write
// does (the caller releases a blocked write with a write deadline,
// worker.releaseWriter).
func (wr *fdWriter) stop() {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.stopped = true
	wr.cond.Broadcast()
}

// reply writes one reply frame now if fd 3 is idle, else queues it for the
// loop. It reports false when the queue is full (the caller decides the run);
// a stopped or dead writer drops the frame and reports true.
func (wr *fdWriter) reply(frame []byte) bool {
	wr.mu.Lock()
	if wr.stopped || wr.dead {
		wr.mu.Unlock()
		return true
	}
	if wr.idleLocked() {
		wr.busy = true
		wr.mu.Unlock()
		wr.writeNow(frame, false)
		return true
	}
	defer wr.mu.Unlock()
	if len(wr.q) >= wr.cap {
		return false
	}
	wr.q = append(wr.q, frame)
	wr.cond.Signal()
	return true
}

// idleLocked: nothing is being written to fd 3 and nothing waits.
func (wr *fdWriter) idleLocked() bool {
	return !wr.busy && !wr.stopped && wr.raw != nil &&
		wr.boot == nil && wr.run == nil && wr.rest == nil && len(wr.q) == 0
}

// writeNow makes one non-blocking write of frame (the caller set busy) and
// leaves what the socket did not take to the loop, which finishes it before
// anything else (or meets the write error and handles it, as the handshake's
// when run says frame is the run frame).
func (wr *fdWriter) writeNow(frame []byte, run bool) {
	n := 0
	_ = wr.raw.Write(func(fd uintptr) bool {
		n, _ = syscall.Write(int(fd), frame)
		return true // never wait for the socket here
	})
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.busy = false
	if n = max(n, 0); n < len(frame) && !wr.dead {
		wr.rest, wr.restRun = frame[n:], run
	}
	if wr.rest != nil || len(wr.q) > 0 {
		wr.cond.Signal()
	}
}

// writeFailure is how the loop ended on a failed write.
type writeFailure struct {
	err       error
	handshake bool // the boot or run frame failed
	stopped   bool // the writer had been stopped (a released write)
}

// loop is the writer goroutine: it writes due frames until stopped or a write
// fails, and returns the failure (nil when stopped). onBoot runs, without the
// writer's lock, when the boot frame is taken and before it is written.
func (wr *fdWriter) loop(onBoot func()) *writeFailure {
	for {
		frame, handshake, boot := wr.next()
		if frame == nil {
			return nil
		}
		if boot {
			onBoot()
		}
		if _, err := wr.conn.Write(frame); err != nil {
			wr.mu.Lock()
			defer wr.mu.Unlock()
			wr.dead = true
			wr.q, wr.rest = nil, nil
			return &writeFailure{err: err, handshake: handshake, stopped: wr.stopped}
		}
		wr.mu.Lock()
		wr.busy = false
		wr.mu.Unlock()
	}
}

// next blocks until a frame is due and fd 3 is free (the rest of a cut
// reply, boot, run, then the queue) or the writer stops; it sets busy. The
// rest of a cut reply goes first: a run frame queued meanwhile (a forged call
// answered before boot-ack) must not land inside it.
func (wr *fdWriter) next() (frame []byte, handshake, boot bool) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	for !(wr.stopped && wr.rest == nil) && (wr.busy || wr.boot == nil && wr.run == nil && wr.rest == nil && len(wr.q) == 0) {
		wr.cond.Wait()
	}
	if wr.stopped && (wr.busy || wr.rest == nil) {
		return nil, false, false
	}
	wr.busy = true
	switch {
	case wr.rest != nil:
		frame, wr.rest = wr.rest, nil
		return frame, wr.restRun, false
	case wr.boot != nil:
		frame, wr.boot = wr.boot, nil
		return frame, true, true
	case wr.run != nil:
		frame, wr.run = wr.run, nil
		return frame, true, false
	}
	frame = wr.q[0]
	wr.q[0] = nil
	wr.q = wr.q[1:]
	return frame, false, false
}
