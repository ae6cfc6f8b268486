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
	w := newWriter(pw, slog.New(slog.DiscardHandler), 1000, func() { behind.Add(1) })
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
