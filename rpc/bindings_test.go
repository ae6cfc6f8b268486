package rpc

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/session"
)

// Racing answers against cancels: every call is answered at most once,
// never after its cancel returned, and the outstanding table empties.
func TestCallAnswerCancelRace(t *testing.T) {
	s := New(Options{In: strings.NewReader(""), Out: io.Discard, Daemon: testDaemon(), Runner: nullRunner{},
		Logger: slog.New(slog.DiscardHandler)})
	c := &runClient{s: s}
	const n = 500
	var answered, late atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		var cancelled atomic.Bool
		cancel := c.CallBinding("1", "tools", "f", []byte("null"), func(session.Answer) {
			if cancelled.Load() {
				late.Add(1)
			}
			answered.Add(1)
		})
		id := strconv.Itoa(i + 1)
		wg.Add(2)
		go func() {
			defer wg.Done()
			s.handle([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":1}`))
			s.handle([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":2}`)) // a second answer: ignored
		}()
		go func() {
			defer wg.Done()
			cancel()
			cancelled.Store(true)
			cancel() // repeated: harmless
		}()
	}
	wg.Wait()
	if late.Load() != 0 {
		t.Errorf("%d answers after cancel returned", late.Load())
	}
	if answered.Load() > n {
		t.Errorf("%d answers for %d calls", answered.Load(), n)
	}
	s.mu.Lock()
	left := len(s.calls)
	s.mu.Unlock()
	if left != 0 {
		t.Errorf("%d calls left outstanding", left)
	}
}
