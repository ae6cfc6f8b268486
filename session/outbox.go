package session

import (
	"sync"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// outItem is one ordered delivery to the client: exactly one field is set.
type outItem struct {
	ev      *protocol.LogEvent
	output  *protocol.OutputEvent
	call    *call
	cancels []func()
	result  *protocol.Result
	// staged is closed once the run directory is gone: the response must
	// never reach the client while the directory still exists (C25).
	staged chan struct{}
}

// outboxSink is what the outbox delivers through; the run implements it.
type outboxSink interface {
	// deliverLog sends one run/log notification.
	deliverLog(ev protocol.LogEvent)
	// deliverOutput sends one run/output notification.
	deliverOutput(ev protocol.OutputEvent)
	// deliverCall sends one binding/call (unless the run was decided meanwhile).
	deliverCall(c *call)
	// flushClient has the client write out what it buffered.
	flushClient()
	// deliverResult hands the settled result to its receiver.
	deliverResult(res protocol.Result)
	// deliveryPanicked is told of a panic in a delivery; the item is dropped
	// and delivery goes on.
	deliveryPanicked(v any)
}

// outbox delivers a run's client deliveries — run/log events, binding calls,
// their cancellations and finally the result — in the order they were pushed,
// from whichever goroutine drains it, and never while the pusher holds a lock:
// pushing only queues. The result waits for its staged gate (the run directory
// removed) before it is handed over; delivered is closed once it has been.
//
// It owns its synchronisation: mu guards the queue, sendMu is held by the one
// goroutine delivering, so deliveries never interleave and none is lost (an
// item pushed while another goroutine delivers is delivered by that one).
type outbox struct {
	sink      outboxSink
	delivered chan struct{} // closed once the result was handed over

	sendMu sync.Mutex // held while delivering (ordered)

	mu    sync.Mutex
	items []outItem
}

func newOutbox(sink outboxSink) *outbox {
	return &outbox{sink: sink, delivered: make(chan struct{})}
}

// push queues one delivery (any goroutine; may be called under other locks).
func (o *outbox) push(it outItem) {
	o.mu.Lock()
	o.items = append(o.items, it)
	o.mu.Unlock()
}

// pending reports whether deliveries are queued.
func (o *outbox) pending() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.items) > 0
}

// flush delivers the queued items in order, then has the client write out
// what it buffered.
func (o *outbox) flush() { o.deliverQueued(true) }

// deliverQueued delivers the queued items in order; push ends with the
// client's Flush (the fd-3 reader delivers each frame's items without it and
// pushes once per read). A panic in a sink callback is reported to the sink;
// the item that panicked is dropped and delivery goes on (the result is
// always delivered).
func (o *outbox) deliverQueued(push bool) {
	for !o.deliverOnce(push) {
	}
}

func (o *outbox) deliverOnce(push bool) (done bool) {
	defer func() {
		if v := recover(); v != nil {
			o.sink.deliveryPanicked(v)
			done = false
		}
	}()
	o.drain(push)
	return true
}

func (o *outbox) drain(push bool) {
	o.sendMu.Lock()
	defer o.sendMu.Unlock()
	if push {
		defer o.sink.flushClient()
	}
	for {
		it, ok := o.pop()
		if !ok {
			return
		}
		o.deliver(it)
	}
}

func (o *outbox) pop() (outItem, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.items) == 0 {
		return outItem{}, false
	}
	it := o.items[0]
	o.items[0] = outItem{}
	o.items = o.items[1:]
	if len(o.items) == 0 {
		o.items = nil
	}
	return it, true
}

func (o *outbox) deliver(it outItem) {
	switch {
	case it.ev != nil:
		o.sink.deliverLog(*it.ev)
	case it.output != nil:
		o.sink.deliverOutput(*it.output)
	case it.call != nil:
		o.sink.deliverCall(it.call)
	case it.cancels != nil:
		for _, cancel := range it.cancels {
			cancel()
		}
	case it.result != nil:
		defer close(o.delivered)
		o.sink.flushClient()
		<-it.staged
		o.sink.deliverResult(*it.result)
	}
}
