package session

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// recordingSink records what the outbox delivers, in order.
type recordingSink struct {
	mu      sync.Mutex
	got     []string
	panicOn string // a log text whose delivery panics
}

func (s *recordingSink) add(e string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, e)
}

func (s *recordingSink) deliverOutput(protocol.OutputEvent) {}

func (s *recordingSink) deliverLog(ev protocol.LogEvent) {
	if ev.Text == s.panicOn {
		panic("sink exploded")
	}
	s.add("log:" + ev.Text)
}
func (s *recordingSink) deliverCall(c *call)               { s.add("call:" + c.name) }
func (s *recordingSink) flushClient()                      { s.add("flush") }
func (s *recordingSink) deliverResult(res protocol.Result) { s.add("result:" + string(res.Value)) }
func (s *recordingSink) deliveryPanicked(v any)            { s.add(fmt.Sprint("panic:", v)) }

func (s *recordingSink) events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// The outbox delivers in push order; a cancels item runs its cancels; the
// result waits for its staged gate and closes delivered; a panicking
// delivery is reported and the items behind it still go out.
func TestOutboxOrderAndGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &recordingSink{panicOn: "boom"}
		o := newOutbox(sink)
		cancelled := false
		staged := make(chan struct{})
		o.push(outItem{ev: &protocol.LogEvent{Text: "a"}})
		o.push(outItem{call: &call{name: "f"}})
		o.push(outItem{ev: &protocol.LogEvent{Text: "boom"}})
		o.push(outItem{cancels: []func(){func() { cancelled = true }}})
		o.push(outItem{result: &protocol.Result{Value: []byte("1")}, staged: staged})

		done := make(chan struct{})
		go func() { defer close(done); o.flush() }()
		synctest.Wait() // the flush is blocked at the gate
		select {
		case <-o.delivered:
			t.Fatal("the result was delivered before its gate opened")
		default:
		}
		close(staged)
		<-done
		<-o.delivered
		// The client's Flush ends every pass, the one a panic cut short too; the
		// result is preceded by one (nothing stays buffered while it waits).
		want := []string{"log:a", "call:f", "flush", "panic:sink exploded", "flush", "result:1", "flush"}
		if got := sink.events(); !slices.Equal(got, want) || !cancelled {
			t.Fatalf("deliveries %q (cancelled %v), want %q", got, cancelled, want)
		}
		if o.pending() {
			t.Fatal("items left after the flush")
		}
	})
}

// A full reply queue is reported (the run decides on it); a stopped writer
// drops replies silently.
func TestWriterReplyQueue(t *testing.T) {
	wr := newTestWriter()
	wr.cap = 2
	wr.boot = []byte("boot\n") // the loop has not taken boot: replies queue
	for i := range 2 {
		if !wr.reply([]byte{byte('0' + i)}) {
			t.Fatalf("reply %d refused below the cap", i)
		}
	}
	if wr.reply([]byte("x")) {
		t.Fatal("a reply past the cap was accepted")
	}
	wr.stop()
	if !wr.reply([]byte("y")) || len(wr.q) != 2 {
		t.Fatalf("a stopped writer: queue %q", wr.q)
	}
	if frame, _, _ := wr.next(); frame != nil {
		t.Fatalf("a stopped writer handed out %q", frame)
	}
}
