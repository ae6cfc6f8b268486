package session

import (
	"errors"
	"slices"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

func TestFairQueueRoundRobin(t *testing.T) {
	a, b, c := &Lane{}, &Lane{}, &Lane{}
	runs := map[*Run]string{}
	var q fairQueue
	for _, x := range []struct {
		lane *Lane
		name string
	}{{a, "a1"}, {a, "a2"}, {a, "a3"}, {b, "b1"}, {c, "c1"}, {c, "c2"}, {nil, "n1"}} {
		r := &Run{lane: x.lane}
		runs[r] = x.name
		q.push(r)
	}
	var c2 *Run
	for r, name := range runs {
		if name == "c2" {
			c2 = r
		}
	}
	if !q.remove(c2) || q.remove(c2) {
		t.Fatal("remove: want true once, then false")
	}
	var got []string
	for q.len() > 0 {
		got = append(got, runs[q.pop()])
	}
	if want := []string{"a1", "b1", "c1", "n1", "a2", "a3"}; !slices.Equal(got, want) {
		t.Errorf("pop order %v, want %v (round robin over lanes, FIFO within each)", got, want)
	}
}

// TestLaneFairness: with one slot, a lane's later run starts before
// another lane's backlog drains (the FIFO order would be a1 a2 a3 b1).
func TestLaneFairness(t *testing.T) {
	m := check(t, func(c *Config) { c.MaxConcurrent = 1 })
	a, b := m.NewLane(0, nil), m.NewLane(0, nil)
	order := make(chan string, 4)
	submit := func(l *Lane, name string) {
		p := protocol.RunParams{Program: "import time\ntime.sleep(0.2)\nreturn " + `"` + name + `"`}
		if _, err := l.Submit(name, p, newFake(nil), func(r protocol.Result) { order <- string(r.Value) }); err != nil {
			t.Fatal(err)
		}
	}
	submit(a, "a1")
	submit(a, "a2")
	submit(a, "a3")
	submit(b, "b1")
	var got []string
	for range 4 {
		got = append(got, recv(t, order))
	}
	if want := []string{`"a1"`, `"a2"`, `"b1"`, `"a3"`}; !slices.Equal(got, want) {
		t.Errorf("results in order %v, want %v", got, want)
	}
}

// TestLaneClose: closing a lane aborts its running and queued runs and
// leaves another lane's run alone.
func TestLaneClose(t *testing.T) {
	m := check(t, func(c *Config) { c.MaxConcurrent = 2 })
	a, b := m.NewLane(0, nil), m.NewLane(0, nil)
	results := map[string]chan protocol.Result{}
	submit := func(l *Lane, name, program string) {
		ch := make(chan protocol.Result, 1)
		results[name] = ch
		if _, err := l.Submit(name, protocol.RunParams{Program: program}, newFake(nil), func(r protocol.Result) { ch <- r }); err != nil {
			t.Fatal(err)
		}
	}
	submit(a, "a-running", "import time\ntime.sleep(30)")
	submit(b, "b-running", "import time\ntime.sleep(0.5)\nreturn 1")
	submit(a, "a-queued", "return 2")
	a.Close(protocol.MsgShuttingDown)
	for _, name := range []string{"a-running", "a-queued"} {
		r := recv(t, results[name])
		if r.Error == nil || r.Error.Kind != protocol.KindAbort || r.Error.Message != protocol.MsgShuttingDown {
			t.Errorf("%s: %s, want abort %q", name, describe(r), protocol.MsgShuttingDown)
		}
	}
	if r := recv(t, results["b-running"]); r.Error != nil || string(r.Value) != "1" {
		t.Errorf("other lane's run: %s, want value 1", describe(r))
	}
	if _, err := a.Submit("late", protocol.RunParams{Program: "return 1"}, newFake(nil), func(protocol.Result) {}); !errors.Is(err, ErrShuttingDown) {
		t.Errorf("Submit on a closed lane: %v, want ErrShuttingDown", err)
	}
}

// TestLaneCap: a lane holds at most its maximum; the next is refused with
// an error that is the queue-full error, while another lane still submits.
func TestLaneCap(t *testing.T) {
	m := check(t, nil)
	a, b := m.NewLane(1, nil), m.NewLane(1, nil)
	done := make(chan protocol.Result, 2)
	p := protocol.RunParams{Program: "import time\ntime.sleep(0.3)\nreturn 1"}
	if _, err := a.Submit("1", p, newFake(nil), func(r protocol.Result) { done <- r }); err != nil {
		t.Fatal(err)
	}
	if !a.Full() {
		t.Error("Full: false for a lane at its maximum")
	}
	if _, err := a.Submit("2", p, newFake(nil), func(protocol.Result) {}); !errors.Is(err, ErrLaneFull) || !errors.Is(err, ErrQueueFull) {
		t.Errorf("second run on a lane of 1: %v, want ErrLaneFull (an ErrQueueFull)", err)
	}
	if _, err := b.Submit("3", p, newFake(nil), func(r protocol.Result) { done <- r }); err != nil {
		t.Errorf("another lane: %v", err)
	}
	recv(t, done)
	recv(t, done)
}
