package rpc

import (
	"bufio"
	"strconv"
	"sync"
	"sync/atomic"
)

// sendQueue decouples a connection's messages from its client's socket
// (Options.MaxUnsent, docs/service.md §4): whoever sends a message — a run
// settling, a binding call, a log line — only queues it, and one goroutine
// of the queue's own writes the queue out. So a run never waits on a client
// that stopped reading, and its slot is free when it settles. The goroutine
// runs only while there is something to write (an idle connection costs
// none). What waits is bounded: once the bytes queued and not yet written
// (the message being written included) would pass max, or the budget all
// connections share, the client has fallen behind; the queue drops
// everything, takes nothing more and calls fellBehind, which closes the
// connection. A message is always taken when nothing is unsent, so neither
// bound refuses a single result to a client that reads.
type sendQueue struct {
	w          *writer
	max        int64
	budget     *UnsentBudget // nil: none shared
	fellBehind func()
	sending    sync.WaitGroup // the sending goroutine, while it runs

	mu      sync.Mutex
	items   []queued
	unsent  int64 // bytes of items and of the batch being written
	running bool  // the sending goroutine runs
	closed  bool  // nothing more is taken: finished, fell behind, or a write failed
}

// queued is one message: its body's length and what writes the body.
type queued struct {
	n     int
	write func(*bufio.Writer)
}

func newSendQueue(w *writer, max int64, budget *UnsentBudget, fellBehind func()) *sendQueue {
	return &sendQueue{w: w, max: max, budget: budget, fellBehind: fellBehind}
}

// UnsentBudget bounds the output that every connection sharing it has
// queued and not yet written, together (Options.Unsent): many connections
// that stop reading cannot make the daemon hold each one's full bound. A
// connection's first unsent message is always counted in, so the total may
// pass the bound by at most one message per connection.
type UnsentBudget struct {
	max  int64
	used atomic.Int64
}

// NewUnsentBudget is a budget of max bytes.
func NewUnsentBudget(max int64) *UnsentBudget { return &UnsentBudget{max: max} }

// Used is the bytes counted in now.
func (b *UnsentBudget) Used() int64 { return b.used.Load() }

// take counts n bytes in; false, and nothing counted, when that would pass
// the bound, unless must.
func (b *UnsentBudget) take(n int64, must bool) bool {
	if b == nil {
		return true
	}
	if b.used.Add(n) > b.max && !must {
		b.used.Add(-n)
		return false
	}
	return true
}

// give counts n bytes out.
func (b *UnsentBudget) give(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// framedSize is a body's size on the wire with its Content-Length header.
func framedSize(n int) int64 {
	return int64(n + len("Content-Length: \r\n\r\n") + len(strconv.Itoa(n)))
}

// push queues one message, starting the sending goroutine if it is not
// running, or drops it once the queue is closed; it never blocks on the
// client.
func (q *sendQueue) push(n int, write func(*bufio.Writer)) {
	size := framedSize(n)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	first := q.unsent == 0
	if !first && q.unsent+size > q.max || !q.budget.take(size, first) {
		unsent := q.unsent
		q.closeLocked()
		q.mu.Unlock()
		q.w.log.Warn("the client fell behind: closing the connection", "unsentBytes", unsent, "maxUnsentBytes", q.max)
		q.fellBehind()
		return
	}
	q.items = append(q.items, queued{n: n, write: write})
	q.unsent += size
	if !q.running {
		q.running = true
		q.sending.Add(1)
		go q.send()
	}
	q.mu.Unlock()
}

// closeLocked takes nothing more and drops what is queued (under mu).
func (q *sendQueue) closeLocked() {
	var dropped int64
	for _, m := range q.items {
		dropped += framedSize(m.n)
	}
	q.unsent -= dropped
	q.budget.give(dropped)
	q.closed = true
	q.items = nil
}

// finish takes nothing more and returns once what was queued is written
// (each write bounded by the output's deadlines) or dropped.
func (q *sendQueue) finish() {
	q.mu.Lock()
	q.closed = true // no sending goroutine starts from now on
	q.mu.Unlock()
	q.sending.Wait()
}

// send writes batches until the queue is empty. A failed write closes the
// queue: the connection is unusable (habit 12).
func (q *sendQueue) send() {
	defer q.sending.Done()
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
		q.budget.give(size)
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

// take returns every queued message; nil when there is none, and then the
// sending goroutine is no longer running.
func (q *sendQueue) take() []queued {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.items
	q.items = nil
	if len(batch) == 0 {
		q.running = false
	}
	return batch
}
