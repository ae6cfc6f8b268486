package session

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Fair queuing (docs/service.md §3). In service mode many connections share
// one Manager's run slots. Each connection submits through a Lane of its
// own; runs waiting for a slot wait in their lane's FIFO, and a freed slot
// goes to the lanes in turn (round robin), so a connection that queued a
// hundred runs delays another connection's next run by at most one run per
// busy lane, not by a hundred. Runs submitted with Manager.Submit (stdio,
// one peer) share the nil lane, which makes the queue the plain FIFO it
// always was.

// fairQueue is the Manager's queue of runs waiting for a slot, guarded by
// Manager.mu: one FIFO per lane, served round robin.
type fairQueue struct {
	order []*Lane          // lanes with waiting runs, in service order
	fifo  map[*Lane][]*Run // each lane's waiting runs
	n     int
}

func (q *fairQueue) len() int { return q.n }

func (q *fairQueue) push(r *Run) {
	if q.fifo == nil {
		q.fifo = map[*Lane][]*Run{}
	}
	if len(q.fifo[r.lane]) == 0 {
		q.order = append(q.order, r.lane)
	}
	q.fifo[r.lane] = append(q.fifo[r.lane], r)
	q.n++
}

// pop takes the first run of the lane whose turn it is; that lane, if it
// has more, goes to the back of the order.
func (q *fairQueue) pop() *Run {
	l := q.order[0]
	q.order = q.order[1:]
	runs := q.fifo[l]
	r := runs[0]
	q.take(l, runs, 0)
	if len(q.fifo[l]) > 0 {
		q.order = append(q.order, l)
	}
	return r
}

// remove takes r out of the queue wherever it waits; false if it does not.
func (q *fairQueue) remove(r *Run) bool {
	runs := q.fifo[r.lane]
	for i, w := range runs {
		if w == r {
			q.take(r.lane, runs, i)
			if len(q.fifo[r.lane]) == 0 {
				q.dropLane(r.lane)
			}
			return true
		}
	}
	return false
}

// take removes runs[i] from lane l's FIFO.
func (q *fairQueue) take(l *Lane, runs []*Run, i int) {
	copy(runs[i:], runs[i+1:])
	runs[len(runs)-1] = nil
	if runs = runs[:len(runs)-1]; len(runs) == 0 {
		delete(q.fifo, l)
	} else {
		q.fifo[l] = runs
	}
	q.n--
}

func (q *fairQueue) dropLane(l *Lane) {
	for i, o := range q.order {
		if o == l {
			q.order = append(q.order[:i], q.order[i+1:]...)
			return
		}
	}
}

// drain empties the queue and returns every waiting run, lane by lane.
func (q *fairQueue) drain() []*Run {
	var all []*Run
	for _, l := range q.order {
		all = append(all, q.fifo[l]...)
	}
	*q = fairQueue{}
	return all
}

// Lane is one connection's share of a Manager: its runs wait in a queue of
// their own, at most max of them are accepted and not yet quiescent at
// once, and Close ends them (and only them).
type Lane struct {
	m   *Manager
	max int
	log *slog.Logger // its runs log with its attributes (the connection)

	mu      sync.Mutex
	closed  bool
	runs    map[*Run]struct{} // accepted and not yet quiescent
	opening sync.WaitGroup    // its session opens and forks under way (owned.go)
}

// NewLane opens a lane on m that holds at most maxRuns runs at once
// (running or queued; 0 means no cap of its own). Its runs log through log
// (nil: the Manager's logger), so their lines carry its attributes.
func (m *Manager) NewLane(maxRuns int, log *slog.Logger) *Lane {
	if log == nil {
		log = m.log
	}
	return &Lane{m: m, max: maxRuns, log: log, runs: map[*Run]struct{}{}}
}

// newRunIn is newRun on lane (nil: the Manager's own).
func (m *Manager) newRunIn(lane *Lane, base protocol.Limits, runID string, p protocol.RunParams, c Client, onResult func(protocol.Result)) *Run {
	r := newRun(m, base, runID, p, c, onResult)
	if lane != nil {
		r.lane = lane
		r.log = lane.log.With("run", runID)
	}
	return r
}

// ErrLaneFull is Lane.Submit's error for a lane already holding its
// maximum; it wraps ErrQueueFull (the client sees the queue-full code).
var ErrLaneFull = fmt.Errorf("%w: this connection has the most runs it may have at once", ErrQueueFull)

// Submit is Manager.Submit on this lane. After Close it returns
// ErrShuttingDown.
func (l *Lane) Submit(runID string, p protocol.RunParams, c Client, onResult func(protocol.Result)) (*Run, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrShuttingDown
	}
	if l.max > 0 && len(l.runs) >= l.max {
		return nil, ErrLaneFull
	}
	r, err := l.m.submit(l, runID, p, c, onResult)
	if err != nil {
		return nil, err
	}
	l.runs[r] = struct{}{}
	go l.forgetWhenQuiescent(r)
	return r, nil
}

func (l *Lane) forgetWhenQuiescent(r *Run) {
	<-r.quiescent
	l.mu.Lock()
	delete(l.runs, r)
	l.mu.Unlock()
}

// Full reports whether a Submit now would fail with ErrQueueFull.
func (l *Lane) Full() bool {
	l.mu.Lock()
	full := l.max > 0 && len(l.runs) >= l.max
	l.mu.Unlock()
	return full || l.m.QueueFull()
}

// Close refuses new runs and sessions on the lane, closes its sessions
// (owned.go), decides every other run of it abort with msg, and returns once
// each is quiescent and its result delivered and every child of its
// sessions is gone. The Manager, its other lanes and its warm pool go on.
func (l *Lane) Close(msg string) {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.closeSessions(msg)
	l.mu.Lock()
	runs := make([]*Run, 0, len(l.runs))
	for r := range l.runs {
		runs = append(runs, r)
	}
	l.mu.Unlock()
	for _, r := range runs {
		l.m.abort(r, msg)
	}
	for _, r := range runs {
		<-r.quiescent
		<-r.out.delivered
	}
}

// Load is a snapshot of a Manager's occupancy (the service's metrics).
type Load struct {
	Running int // runs holding a slot
	Queued  int // runs waiting for a slot
	Active  int // runs accepted and not yet quiescent
	Warm    int // warm children ready to take a run
}

// Load returns the Manager's occupancy now.
func (m *Manager) Load() Load {
	m.mu.Lock()
	ld := Load{Running: m.running, Queued: m.queue.len(), Active: len(m.runs)}
	m.mu.Unlock()
	m.warm.mu.Lock()
	ld.Warm = len(m.warm.ready)
	m.warm.mu.Unlock()
	return ld
}
