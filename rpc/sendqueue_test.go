package rpc

import (
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// A client that stops reading never blocks a sender: the first message
// waits on the client, the next one that would pass the bound closes the
// queue (fellBehind, once) and everything later is dropped at once; a
// single message larger than the bound is taken when nothing is unsent.
func TestSendQueueFellBehind(t *testing.T) {
	leakcheck.Check(t)
	r, pw := io.Pipe()
	var behind atomic.Int32
	w := newWriter(pw, slog.New(slog.DiscardHandler), 1000, nil, func() { behind.Add(1) })
	w.frame([]byte(strings.Repeat("x", 5000))) // larger than the bound alone: taken
	w.frame([]byte(`{}`))                      // 5000 unsent: past the bound
	for range 100 {
		w.frame([]byte(`{}`)) // dropped: the sender does not block
	}
	if got := behind.Load(); got != 1 {
		t.Errorf("fellBehind called %d times, want 1", got)
	}
	r.Close() // the connection closes: the blocked write fails
	w.finish()
}

// Connections that share a budget fall behind it together: each one's
// first message is counted in whatever the budget, the next one past the
// budget closes the connection that queues it, and every byte is counted
// out again once written or dropped.
func TestSendQueueSharedBudget(t *testing.T) {
	leakcheck.Check(t)
	budget := NewUnsentBudget(8000)
	var behind [2]atomic.Int32
	var readers [2]*io.PipeReader
	var ws [2]*writer
	for i := range ws {
		r, pw := io.Pipe()
		readers[i] = r
		ws[i] = newWriter(pw, slog.New(slog.DiscardHandler), 1<<20, budget, func() { behind[i].Add(1) })
		ws[i].frame([]byte(strings.Repeat("x", 5000))) // first: counted in, past the budget for the second
	}
	if used := budget.Used(); used < 10000 {
		t.Errorf("budget used %d, want both first messages counted in", used)
	}
	ws[1].frame([]byte(`{}`))
	if behind[0].Load() != 0 || behind[1].Load() != 1 {
		t.Errorf("fell behind: %d %d, want only the second connection", behind[0].Load(), behind[1].Load())
	}
	go io.Copy(io.Discard, readers[0]) // the first client reads again
	ws[0].finish()
	readers[0].Close()
	readers[1].Close()
	ws[1].finish()
	if used := budget.Used(); used != 0 {
		t.Errorf("budget used %d once everything is written or dropped, want 0", used)
	}
}
