package rpc

import (
	"bufio"
	"strconv"
	"sync"
)

// sendQueue decouples a connection's messages from its client's socket
// (Options.MaxUnsent, docs/service.md §4): whoever sends a message — a run
// settling, a binding call, a log line — only queues it, and one goroutine
// of the queue's own writes the queue out. So a run never waits on a client
// that stopped reading, and its slot is free when it settles. What waits is
// bounded: once the bytes queued and not yet written (the message being
// written included) would pass max, the client has fallen behind; the queue
// drops everything, takes nothing more and calls fellBehind, which closes
// the connection. A message larger than max alone is taken when nothing is
// unsent, so the bound never refuses a single result.
type sendQueue struct {
	w          *writer
	max        int64
	fellBehind func()
	done       chan struct{} // closed when the sending goroutine returns

	mu     sync.Mutex
	more   sync.Cond // signalled when items grow or closed is set
	items  []queued
	unsent int64 // bytes of items and of the batch being written
	closed bool  // nothing more is taken: finished, fell behind, or a write failed
}

// queued is one message: its body's length and what writes the body.
type queued struct {
	n     int
	write func(*bufio.Writer)
}

// newSendQueue starts the goroutine that writes w's queued messages.
func newSendQueue(w *writer, max int64, fellBehind func()) *sendQueue {
	q := &sendQueue{w: w, max: max, fellBehind: fellBehind, done: make(chan struct{})}
	q.more.L = &q.mu
	go q.send()
	return q
}

// framedSize is a body's size on the wire with its Content-Length header.
func framedSize(n int) int64 {
	return int64(n + len("Content-Length: \r\n\r\n") + len(strconv.Itoa(n)))
}

// push queues one message, or drops it once the queue is closed; it never
// blocks on the client.
func (q *sendQueue) push(n int, write func(*bufio.Writer)) {
	size := framedSize(n)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	if q.unsent > 0 && q.unsent+size > q.max {
		unsent := q.unsent
		q.closeLocked()
		q.mu.Unlock()
		q.w.log.Warn("the client fell behind: closing the connection", "unsentBytes", unsent, "maxUnsentBytes", q.max)
		q.fellBehind()
		return
	}
	q.items = append(q.items, queued{n: n, write: write})
	q.unsent += size
	q.mu.Unlock()
	q.more.Signal()
}

// closeLocked takes nothing more and drops what is queued (under mu).
func (q *sendQueue) closeLocked() {
	q.closed = true
	q.items = nil
	q.more.Broadcast()
}

// finish takes nothing more and returns once what was queued is written
// (each write bounded by the output's deadlines) or dropped.
func (q *sendQueue) finish() {
	q.mu.Lock()
	q.closed = true
	q.more.Broadcast()
	q.mu.Unlock()
	<-q.done
}

// send writes batches until the queue is closed and empty. A failed write
// closes the queue: the connection is unusable (habit 12).
func (q *sendQueue) send() {
	defer close(q.done)
	for {
		batch := q.take()
		if batch == nil {
			return
		}
		var size int64
		q.w.bound()
		for _, m := range batch {
			q.w.header(m.n)
			m.write(q.w.bw)
			size += framedSize(m.n)
		}
		err := q.w.bw.Flush()
		q.mu.Lock()
		q.unsent -= size
		if err != nil {
			q.closeLocked()
		}
		q.mu.Unlock()
		if err != nil {
			q.w.check(err)
			return
		}
	}
}

// take waits for queued messages and returns them all; nil once the queue
// is closed and empty.
func (q *sendQueue) take() []queued {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.more.Wait()
	}
	batch := q.items
	q.items = nil
	return batch
}
