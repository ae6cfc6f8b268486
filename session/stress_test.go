package session

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// TestStress submits runs of every shape concurrently, cancels some at random
// moments (queued, starting, live, after settlement), then shuts down in the
// middle: every run answers exactly once and nothing leaks.
func TestStress(t *testing.T) {
	m := check(t, func(c *Config) {
		c.MaxConcurrent = 3
		c.MaxQueued = 64
		c.WarmPool = 2
		c.Grace = 100 * time.Millisecond
	})
	programs := []string{
		"return 1",
		"import time\ntime.sleep(0.2)\nprint('slept')\nreturn 2",
		"import asyncio\nr = await asyncio.gather(*(tools.echo(i) for i in range(50)))\nprint(len(r))\nreturn len(r)",
		"import time\nprint('loop', flush=True)\nwhile True:\n    time.sleep(0.01)",
		"import os\nos.write(1, b'native\\n' * 100)\nos._exit(3)",
		"await tools.hang({})",
		"raise ValueError('x')",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var wg sync.WaitGroup
	var answered, submitted atomic.Int64
	counts := make([]atomic.Int32, 40)
	for i := range 40 {
		fc := newFake(map[string]behaviour{"echo": echo(), "hang": hang()})
		r, err := m.Submit(fmtInt(i), protocol.RunParams{Program: programs[i%len(programs)], Bindings: tools("echo", "hang"),
			Stream: i%2 == 0, Limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 3000 })}, fc,
			func(res protocol.Result) {
				counts[i].Add(1)
				answered.Add(1)
				if res.Logs == nil {
					t.Errorf("run %d: nil logs", i)
				}
			})
		if err != nil {
			t.Fatalf("Submit %d: %v", i, err)
		}
		submitted.Add(1)
		if rng.IntN(3) == 0 {
			delay := time.Duration(rng.IntN(1500)) * time.Millisecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(delay)
				r.Cancel()
				r.Cancel()
			}()
		}
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
	}
	time.Sleep(time.Second)
	m.Shutdown()
	wg.Wait()
	if answered.Load() != submitted.Load() {
		t.Errorf("%d results for %d runs", answered.Load(), submitted.Load())
	}
	for i := range counts {
		if n := counts[i].Load(); n != 1 {
			t.Errorf("run %d answered %d times", i, n)
		}
	}
}

// TestStressSessions submits runs of every shape to four sessions and to no
// session, concurrently, cancels some at random moments, closes one session
// in the middle, then shuts down: every run answers exactly once, every
// session run's result carries its session, and nothing leaks.
func TestStressSessions(t *testing.T) {
	m := check(t, func(c *Config) {
		c.MaxConcurrent = 3
		c.WarmPool = 2
		c.Grace = 100 * time.Millisecond
		c.MaxSessions = 4
	})
	var sids []string
	for range 4 {
		sid, err := m.OpenSession(protocol.SessionParams{}, nil)
		if err != nil {
			t.Fatalf("OpenSession: %v", err)
		}
		sids = append(sids, sid)
	}
	programs := []string{
		"n = globals().get('n', 0) + 1\nreturn n",
		"import time\ntime.sleep(0.1)\nprint('slept')",
		"import asyncio\nr = await asyncio.gather(*(tools.echo(i) for i in range(20)))\nreturn len(r)",
		"raise ValueError('x')",
		"await tools.hang({})",
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var wg sync.WaitGroup
	counts := make([]atomic.Int32, 60)
	for i := range 60 {
		sid := ""
		if i%5 != 0 {
			sid = sids[i%4]
		}
		fc := newFake(map[string]behaviour{"echo": echo(), "hang": hang()})
		r, err := m.Submit(fmtInt(i), protocol.RunParams{Program: programs[i%len(programs)], Bindings: tools("echo", "hang"),
			SessionID: sid, Limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 1000 })}, fc,
			func(res protocol.Result) {
				counts[i].Add(1)
				if (res.Session != nil) != (sid != "") || res.Session != nil && res.Session.ID != sid {
					t.Errorf("run %d in %q: session %+v", i, sid, res.Session)
				}
			})
		var se *SessionError
		switch {
		case errors.As(err, &se): // its session was lost meanwhile (a timeout, a cancel)
			counts[i].Add(1)
			continue
		case err != nil:
			t.Fatalf("Submit %d: %v", i, err)
		}
		if rng.IntN(4) == 0 {
			delay := time.Duration(rng.IntN(1000)) * time.Millisecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(delay)
				r.Cancel()
			}()
		}
		if i == 30 {
			if wait, err := m.CloseSession(sids[1]); err == nil {
				wait()
			}
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	m.Shutdown()
	wg.Wait()
	for i := range counts {
		if n := counts[i].Load(); n != 1 {
			t.Errorf("run %d answered %d times", i, n)
		}
	}
}
