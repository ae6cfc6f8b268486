package session

import (
	"sync"
	"syscall"
	"time"
)

// warmPool keeps up to size children staged, spawned and waiting for their
// boot frame (docs/containment-start-modes.md §4, docs/child-protocol-daemon.md §4.3 step 4). Each serves one run; the
// pool refills in the background, with back-off after failures.
//
// A run that finds no child ready while a refill is under way waits for that
// refill rather than spawning a child of its own (see take).
//
// A child taken by the only running run has its place refilled once that run
// settles, or warmLease after the take, whichever comes first, while another
// child is still ready: a refill (staging, fork, the child's start-up) costs a
// few milliseconds of CPU that would otherwise compete with the run for the
// machine's cores. With other runs going (the cores are busy anyway, and the
// next run should find a child), or no child left ready, the refill starts at
// once.
type warmPool struct {
	m    *Manager
	size int

	mu       sync.Mutex
	cond     *sync.Cond
	ready    []*worker
	spawning int
	waiting  int           // runs in take waiting for a refill under way
	lent     int           // taken children whose runs hold their places (see lendLocked)
	lease    time.Duration // how long at most a run holds its child's place
	stopped  bool
	gen      int // renewals so far: a child started before the last one is not kept
	stopCh   chan struct{}
	wg       sync.WaitGroup
}

const (
	warmBackoffMin = 100 * time.Millisecond
	warmBackoffMax = 5 * time.Second
	warmLease      = 20 * time.Millisecond
)

func newWarmPool(m *Manager, size int) *warmPool {
	p := &warmPool{m: m, size: size, lease: warmLease, stopCh: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	if size > 0 {
		p.wg.Add(1)
		go p.fill()
	}
	return p
}

// fill keeps the pool at size until stopped.
func (p *warmPool) fill() {
	defer p.wg.Done()
	backoff := warmBackoffMin
	for {
		p.mu.Lock()
		for !p.stopped && len(p.ready)+p.spawning >= p.targetLocked() {
			p.cond.Wait()
		}
		if p.stopped {
			p.mu.Unlock()
			return
		}
		p.spawning++
		gen := p.gen
		p.mu.Unlock()

		w, fail := p.m.spawnWorker()

		p.mu.Lock()
		p.spawning--
		p.cond.Broadcast() // a run waiting in take gets this child, or spawns its own
		switch {
		case fail != nil:
			p.mu.Unlock()
			p.m.log.Error("warm pool: failed to start a child", "err", fail.Message, "retryIn", backoff)
			select {
			case <-p.stopCh:
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, warmBackoffMax)
			continue
		case p.stopped:
			p.mu.Unlock()
			p.discard(w)
			return
		case p.gen != gen:
			p.mu.Unlock()
			p.discard(w)
			continue
		}
		backoff = warmBackoffMin
		w.warm = true
		p.ready = append(p.ready, w)
		p.wg.Add(1)
		go p.monitor(w)
		p.mu.Unlock()
	}
}

// targetLocked is how many children the pool should hold now: its size less
// the places lent to running runs, but never below one.
func (p *warmPool) targetLocked() int {
	return max(p.size-p.lent, 1)
}

// lendLocked holds a taken child's place until the returned release is called
// (at its run's settlement) or the lease has passed.
func (p *warmPool) lendLocked() (release func()) {
	p.lent++
	giveBack := sync.OnceFunc(func() {
		p.mu.Lock()
		p.lent--
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	t := time.AfterFunc(p.lease, giveBack)
	return func() {
		t.Stop()
		giveBack()
	}
}

// monitor discards a warm child that dies while waiting.
func (p *warmPool) monitor(w *worker) {
	defer p.wg.Done()
	select {
	case <-w.exited:
	case <-p.stopCh:
		return
	}
	p.mu.Lock()
	found := p.removeLocked(w)
	p.cond.Broadcast()
	p.mu.Unlock()
	if found {
		p.m.log.Warn("warm pool: a waiting child exited", "pid", w.proc.Pid)
		p.discard(w)
	}
}

func (p *warmPool) removeLocked(w *worker) bool {
	for i, x := range p.ready {
		if x == w {
			p.ready = append(p.ready[:i], p.ready[i+1:]...)
			return true
		}
	}
	return false
}

// take hands out the oldest live warm child, or nil when the run must spawn
// its own. With none ready but a refill under way that no other run waits for,
// it waits for that refill: it started before a spawn of the run's own could,
// and in fork mode such a spawn would queue behind it anyway (back to back
// here, one run in five found the pool empty and took 9-12 ms). alone says whether
// the run is the only one running: only then is its child's place lent (see
// warmPool), and the child's release must be called when the run settles.
func (p *warmPool) take(alone bool) *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.stopped {
		if w := p.popLiveLocked(); w != nil {
			if alone {
				w.release = p.lendLocked()
			}
			return w
		}
		if p.spawning <= p.waiting {
			return nil
		}
		p.waiting++
		p.cond.Wait()
		p.waiting--
	}
	return nil
}

// popLiveLocked removes and returns the oldest ready child that is still
// alive, discarding dead ones on the way; nil when none is left.
func (p *warmPool) popLiveLocked() *worker {
	for len(p.ready) > 0 {
		w := p.ready[0]
		p.ready = p.ready[1:]
		p.cond.Broadcast()
		select {
		case <-w.exited:
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.discard(w) }()
		default:
			return w
		}
	}
	return nil
}

// discard kills a warm child, reaps it and removes its directory.
func (p *warmPool) discard(w *worker) {
	w.proc.SignalGroup(syscall.SIGKILL)
	w.closeFiles()
	<-w.exited
	w.closeDir(p.m.log)
}

// stop kills every warm child and stops refilling.
func (p *warmPool) stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	close(p.stopCh)
	ws := p.ready
	p.ready = nil
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, w := range ws {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.discard(w) }()
	}
}

// renew discards the children waiting now and refills the pool: once the
// preloaded fork server is ready, the children started cold before it
// (docs/containment-start-modes.md §4.4) give their places to forks of it.
func (p *warmPool) renew() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	for _, w := range p.ready {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.discard(w) }()
	}
	p.ready = nil
	p.gen++
	p.cond.Broadcast()
}

// wait returns once every warm child is dead and its directory removed.
func (p *warmPool) wait() { p.wg.Wait() }
