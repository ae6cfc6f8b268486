package session

import (
	"sync"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// outputBudget is a run's one budget over displayed outputs and out/ files
// (docs/protocol-files.md §12.4), in production order, in decoded bytes. The first
// item that does not fit truncates it: that item and every later one are
// dropped.
type outputBudget struct {
	limit, used int64
	truncated   bool
}

// take charges n bytes if the budget is not truncated and n fits; otherwise
// it truncates and reports false.
func (b *outputBudget) take(n int64) bool {
	if b.truncated || n > b.limit-b.used {
		b.truncated = true
		return false
	}
	b.used += n
	return true
}

func (b *outputBudget) truncate() { b.truncated = true }

// left is what the budget may still take: 0 once truncated.
func (b *outputBudget) left() int64 {
	if b.truncated {
		return 0
	}
	return b.limit - b.used
}

// outputs is what a run keeps of its displayed objects: at most
// protocol.MaxOutputs, then the marker.
type outputs struct {
	budget  outputBudget
	list    []protocol.Output
	counted bool // the count cap, not the bytes, truncated the budget
	marked  bool // the marker has been appended
}

func newOutputs(limit int64) *outputs { return &outputs{budget: outputBudget{limit: limit}} }

// add bills a checked output frame (wireguard.Frame, type output) and keeps a
// canonical copy of its data when it fits: the copy is made only then, so the
// run never holds more than the budget. It returns the kept output, or nil.
func (o *outputs) add(f *wireguard.Frame) *protocol.Output {
	switch {
	case o.budget.truncated:
		return nil
	case f.Truncated:
		o.budget.truncate()
		return nil
	case f.Data == nil: // nothing but refused images
		return nil
	case len(o.list) == protocol.MaxOutputs:
		o.counted = true
		o.budget.truncate()
		return nil
	}
	if !o.budget.take(f.DataSize) {
		return nil
	}
	o.list = append(o.list, protocol.Output{Data: f.OutputCopy()})
	return &o.list[len(o.list)-1]
}

// mark appends the truncation marker once the budget is truncated (once); it
// returns the marker's event, or nil.
func (o *outputs) mark() *protocol.OutputEvent {
	if !o.budget.truncated || o.marked {
		return nil
	}
	o.marked = true
	text := protocol.OutputsMarker(o.budget.limit)
	if o.counted {
		text = protocol.OutputsCountMarker()
	}
	data := wireguard.AppendString([]byte(`{"text/plain":`), text)
	o.list = append(o.list, protocol.Output{Data: append(data, '}')})
	return &protocol.OutputEvent{Index: len(o.list) - 1, Data: o.list[len(o.list)-1].Data}
}

// output handles an output frame (docs/child-protocol-wire.md §2.2): a displayed
// object ends any open log entry (it sits between log lines), is billed, and
// is streamed in order with run/log; the marker follows the first that does
// not fit. Each refused image (protocol.ImageProblem) is dropped with a log
// line, before the output it was part of.
func (m *machine) output(f *wireguard.Frame) {
	if m.decided() {
		return
	}
	m.capture.CloseHold()
	for _, img := range f.Refused {
		m.capture.Log(protocol.RefusedImageNote(img.Mime, img.Problem), false, false)
	}
	if kept := m.outs.add(f); kept != nil && m.onOutput != nil {
		m.onOutput(protocol.OutputEvent{Index: len(m.outs.list) - 1, Data: kept.Data})
	}
	if ev := m.outs.mark(); ev != nil && m.onOutput != nil {
		m.onOutput(*ev)
	}
}

// OutputSink is implemented by a Client that streams outputs: with stream
// true, it receives each run/output notification (docs/protocol-files.md §12.3)
// in order with Log, flushed by Flush like Log's.
type OutputSink interface {
	Output(runID string, ev protocol.OutputEvent)
}

// collected is a run's reading of its child's out/: once per run and child
// (a run moved to a fresh child reads that one's), whoever asks first.
type collected struct {
	mu     sync.Mutex
	from   *worker
	files  []protocol.OutFile
	budget outputBudget // the run's outputs budget after the files
}

// collect lists and reads w's out/ against the budget as the run's outputs
// left it. It runs when every descriptor of the child has ended (before the
// early removal of its directory) or at settlement, whichever comes first: no
// output frame is taken after either. A second call for w waits for the first.
func (r *Run) collect(w *worker) {
	c := &r.collected
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.from == w {
		return
	}
	r.mu.Lock()
	b := r.sm.outs.budget
	deadline := collectDeadline(r.sm.handoff, r.sm.lim.MaxWallMs)
	r.mu.Unlock()
	c.from, c.files = w, r.outFiles(w, &b, deadline)
	c.budget = b
}

// outFiles is collectOut of w's directory; a session child's out/ that is
// an empty folder is seen through the session's held directory.
func (r *Run) outFiles(w *worker, b *outputBudget, deadline time.Time) []protocol.OutFile {
	if s := r.sm.sess; s != nil && s.held.outEmpty(w) {
		return nil
	}
	return collectOut(w.wd, b, deadline)
}

// completeResult adds w's out/ files to the queued result and, when they
// truncated the budget, the marker (streamed just before the result).
func (r *Run) completeResult(w *worker, res *protocol.Result) {
	if w != nil {
		r.collect(w)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w != nil {
		r.sm.outs.budget = r.collected.budget
		res.Files = r.collected.files
	}
	if ev := r.sm.outs.mark(); ev != nil && r.sm.onOutput != nil {
		r.lateMarker = ev
	}
	res.Outputs = r.sm.outs.list
}

// deliverOutput sends one run/output notification when the client streams them.
func (r *Run) deliverOutput(ev protocol.OutputEvent) {
	if s, ok := r.client.(OutputSink); ok {
		s.Output(r.id, ev)
	}
}
