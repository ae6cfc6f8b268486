package session

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// fakePython writes an executable shell script standing in for the
// interpreter (argv [-u, -I, <dir>/bootstrap.py] is ignored).
func fakePython(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fakepython")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// poolUntil polls the pool, under its lock, until cond holds; after 10 s it
// fails the test with what it was waiting for and the pool's counts.
func poolUntil(t *testing.T, p *warmPool, what string, cond func(p *warmPool) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		ok := cond(p)
		counts := fmt.Sprintf("%d ready, %d spawning, %d waiting, %d lent", len(p.ready), p.spawning, p.waiting, p.lent)
		p.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool never %s (%s)", what, counts)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// countingHandler is a log handler that counts the records whose message is msg.
type countingHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// bigBindings makes a boot frame far larger than a socket buffer.
func bigBindings() []protocol.Namespace {
	names := make([]string, 20000)
	for i := range names {
		names[i] = "function_with_a_rather_long_name_" + fmtInt(i)
	}
	return []protocol.Namespace{{Global: "tools", Names: names}}
}

// TestSubstrate: staging, spawn and boot/run write failures resolve as
// worker-exit results, never panics, and leave no run directory (C113,
// C224–C227).
func TestSubstrate(t *testing.T) {
	t.Run("staging", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "not-a-dir")
		os.WriteFile(file, nil, 0o600)
		m := check(t, func(c *Config) { c.TempDir = file })
		res, fc, el := execute(t, m, tcase{name: "stage", program: "return 1"})
		tcase{kind: protocol.KindWorkerExit, contains: []string{"failed to stage the python bootstrap in the daemon's temporary directory: "}, logs: []string{}}.verify(t, res, fc, el)
		if res.Stats.WallMs != 0 || res.Stats.CPUMs != 0 {
			t.Errorf("stats %+v", res.Stats)
		}
	})
	t.Run("C225-enoent", func(t *testing.T) {
		m := check(t, func(c *Config) { c.Python = filepath.Join(t.TempDir(), "missing", "python3") })
		res, fc, el := execute(t, m, tcase{name: "spawn", program: "return 1"})
		tcase{kind: protocol.KindWorkerExit, contains: []string{"python spawn error: "}, logs: []string{}}.verify(t, res, fc, el)
	})
	t.Run("C113-removed", func(t *testing.T) {
		d := t.TempDir()
		link := filepath.Join(d, "python3")
		if err := os.Symlink(realPython(t), link); err != nil {
			t.Fatal(err)
		}
		m := check(t, func(c *Config) { c.Python = link; c.StartMode = StartSpawn })
		res, fc, el := execute(t, m, tcase{name: "before", program: "return 1"})
		tcase{value: "1"}.verify(t, res, fc, el)
		os.Remove(link)
		res, fc, el = execute(t, m, tcase{name: "after", program: "return 1", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 3000 })})
		tcase{kind: protocol.KindWorkerExit, contains: []string{"python spawn error: "}}.verify(t, res, fc, el)
		if !strings.HasPrefix(res.Error.Message, "python spawn error: ") {
			t.Errorf("message %q", res.Error.Message)
		}
	})
	t.Run("C224-boot-write", func(t *testing.T) {
		// The child closes fd 3 at once; a boot frame larger than the socket
		// buffer cannot be written.
		py := fakePython(t, "exec 3>&-\nsleep 5")
		m := check(t, func(c *Config) { c.Python = py; c.StartMode = StartSpawn })
		res, fc, el := execute(t, m, tcase{name: "boot", program: "return 1", bindings: bigBindings()})
		tcase{kind: protocol.KindWorkerExit, contains: []string{"failed to boot python subprocess: "}, maxElapsed: 5 * time.Second}.verify(t, res, fc, el)
	})
	t.Run("C226-run-write", func(t *testing.T) {
		// Acknowledge boot, then close fd 3: a large run frame fails.
		py := fakePython(t, "read -r line <&3\nprintf '{\"type\":\"boot-ack\"}\\n' >&3\nexec 3>&-\nsleep 5")
		m := check(t, func(c *Config) { c.Python = py; c.StartMode = StartSpawn })
		res, fc, el := execute(t, m, tcase{name: "run", program: "return 1\n" + strings.Repeat("# padding\n", 200000)})
		tcase{kind: protocol.KindWorkerExit, contains: []string{"failed to boot python subprocess: "}, maxElapsed: 5 * time.Second}.verify(t, res, fc, el)
	})
	t.Run("no-boot-ack", func(t *testing.T) {
		// A child that reads boot and exits without a frame: worker-exit
		// with its code.
		py := fakePython(t, "read -r line <&3\nexit 3")
		m := check(t, func(c *Config) { c.Python = py; c.StartMode = StartSpawn })
		res, fc, el := execute(t, m, tcase{name: "exit", program: "return 1"})
		tcase{kind: protocol.KindWorkerExit, message: "python exited (code=3, signal=null) before completing", exitCode: intp(3)}.verify(t, res, fc, el)
	})
	t.Run("C227-writer-released", func(t *testing.T) {
		// The program stops reading fd 3 while two 4 MiB answers are due;
		// once the first has reached its socket (the writer is then stuck
		// on it: 4 MiB never fit) it says so with a third call, and the run
		// is cancelled: the writer is released at the decision, the run
		// settles. The cancel waits for that call, not for a clock.
		m := check(t, nil)
		big := `"` + strings.Repeat("R", 4<<20) + `"`
		stuck := make(chan struct{}, 1)
		fc := newFake(map[string]behaviour{"big": constV(big), "stuck": func([]byte) (Answer, time.Duration, bool) {
			stuck <- struct{}{}
			return Answer{}, 0, true
		}})
		results := make(chan protocol.Result, 1)
		r, err := m.Submit(`"blocked"`, protocol.RunParams{Bindings: tools("big", "stuck"), Limits: testLimits(),
			Program: forge(callFrame(0, "big"), callFrame(1, "big")) + "import select, time\nselect.select([3], [], [])\n" +
				forge(callFrame(2, "stuck")) + "time.sleep(30)"},
			fc, func(res protocol.Result) { fc.markResult(); results <- res })
		if err != nil {
			t.Fatal(err)
		}
		recv(t, stuck)
		r.Cancel()
		res := recv(t, results)
		fc.timers.Wait()
		tcase{kind: protocol.KindAbort, message: protocol.MsgCancelled, nCalls: 3}.verify(t, res, fc, 0)
	})
	t.Run("reply-queue-full", func(t *testing.T) {
		// 1200 answered calls while the program never reads fd 3: once the
		// socket is full, more than 1024 replies wait for the writer.
		m := check(t, nil)
		res, fc, el := execute(t, m, tcase{name: "rq", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 20000 }),
			bindings: tools("echo"), client: map[string]behaviour{"echo": constV(`"` + strings.Repeat("r", 4096) + `"`)},
			program: "import os, time\nos.write(3, b''.join(b'{\"type\":\"call\",\"id\":%d,\"global\":\"tools\",\"name\":\"echo\",\"args\":{}}\\n' % i for i in range(1200)))\ntime.sleep(30)"})
		tcase{kind: protocol.KindWorkerExit, message: protocol.MsgReplyQueueFull, nCalls: -1, maxElapsed: 15 * time.Second}.verify(t, res, fc, el)
	})
	t.Run("client-panic", func(t *testing.T) {
		m := check(t, nil)
		res, fc, el := execute(t, m, tcase{name: "panic", bindings: tools("boom"),
			client:  map[string]behaviour{"boom": func([]byte) (Answer, time.Duration, bool) { panic("client exploded") }},
			program: "return await tools.boom({})"})
		tcase{kind: protocol.KindWorkerExit, contains: []string{"internal daemon error", "client exploded"}, nCalls: 1}.verify(t, res, fc, el)
	})
}

// TestWarmChildLostBeforeBoot: a warm child that ends before acknowledging
// boot (its fork server was killed, say) costs its run nothing: no program
// code has run, so the run starts again on a fresh child — once. A cold child
// that does the same fails its run (no-boot-ack and C224 above), and so does a
// second loss.
func TestWarmChildLostBeforeBoot(t *testing.T) {
	// lostFirst makes the first interpreter started run body instead (every
	// later one is the real interpreter); the marker exists once that first
	// one has claimed its part.
	lostFirst := func(body string) (py, marker string) {
		marker = filepath.Join(t.TempDir(), "first")
		return fakePython(t, fmt.Sprintf("if mkdir %q 2>/dev/null; then\n%s\nfi\nexec %q \"$@\"", marker, body, realPython(t))), marker
	}
	// run executes tc on a daemon whose one warm child is ready, and checks
	// that exactly one restart was logged. With a marker, the run waits until
	// the ready child has claimed it: a refill started once the run takes
	// that child could otherwise win the claim on a loaded machine.
	run := func(t *testing.T, py, marker string, tc tcase) (protocol.Result, *fakeClient, time.Duration) {
		var restarts atomic.Int64
		m := check(t, func(c *Config) {
			c.Python, c.StartMode, c.WarmPool = py, StartSpawn, 1
			c.Logger = slog.New(countingHandler{msg: logLostBeforeBoot, n: &restarts})
		})
		poolUntil(t, m.warm, "had its child ready", func(p *warmPool) bool { return len(p.ready) == 1 })
		if marker != "" {
			poolUntil(t, m.warm, "had its child claim the lost part", func(*warmPool) bool {
				_, err := os.Stat(marker)
				return err == nil
			})
		}
		res, fc, el := execute(t, m, tc)
		if n := restarts.Load(); n != 1 {
			t.Errorf("%d restarts logged, want 1", n)
		}
		return res, fc, el
	}
	t.Run("exits", func(t *testing.T) {
		py, marker := lostFirst("read -r line <&3\nexit 3")
		res, fc, el := run(t, py, marker, tcase{name: "exits", program: "return 1"})
		tcase{value: "1"}.verify(t, res, fc, el)
	})
	t.Run("boot-write", func(t *testing.T) {
		// fd 3 closed at once: the boot frame, larger than the socket buffer,
		// cannot be written.
		py, marker := lostFirst("exec 3>&-\nsleep 5")
		res, fc, el := run(t, py, marker, tcase{name: "boot-write", program: "return 1", bindings: bigBindings()})
		tcase{value: "1"}.verify(t, res, fc, el)
	})
	t.Run("twice", func(t *testing.T) {
		res, fc, el := run(t, fakePython(t, "read -r line <&3\nexit 3"), "", tcase{name: "twice", program: "return 1"})
		tcase{kind: protocol.KindWorkerExit, message: "python exited (code=3, signal=null) before completing", exitCode: intp(3)}.verify(t, res, fc, el)
	})
	t.Run("boot-write-twice", func(t *testing.T) {
		// C224 with a warm pool: the boot write fails on both children.
		res, fc, el := run(t, fakePython(t, "exec 3>&-\nsleep 5"), "", tcase{name: "boot-write-twice", program: "return 1", bindings: bigBindings()})
		tcase{kind: protocol.KindWorkerExit, contains: []string{"failed to boot python subprocess: "}, maxElapsed: 5 * time.Second}.verify(t, res, fc, el)
	})
}

// TestWarmPool: runs served by warm children behave like cold ones; the pool
// refills; Shutdown kills the waiting children and removes their directories.
func TestWarmPool(t *testing.T) {
	m := check(t, func(c *Config) { c.WarmPool = 2; c.MaxConcurrent = 2 })
	time.Sleep(500 * time.Millisecond) // let the pool fill
	for i := range 4 {
		res, fc, el := execute(t, m, tcase{name: "warm" + fmtInt(i), program: `import os
env = dict(os.environ)
env.pop("LC_CTYPE", None)
open("mine", "w").write("x")
return {"keys": sorted(env), "cwd": os.path.realpath(os.getcwd()) == os.path.realpath(env["TMPDIR"]), "files": sorted(os.listdir("."))}`})
		tcase{value: `{"keys":["TMPDIR"],"cwd":true,"files":["bootstrap.py","mine","out","protocol.py"]}`}.verify(t, res, fc, el)
	}
	res, fc, el := execute(t, m, tcase{name: "warm-wall", limits: lim(func(l *protocol.Limits) { l.MaxWallMs = 400 }),
		program: "import time\ntime.sleep(10)"})
	tcase{kind: protocol.KindTimeout, budget: protocol.BudgetWall, message: "wall-clock ceiling reached (400ms)"}.verify(t, res, fc, el)
}

// TestWarmPoolLease: a child taken by the only running run has its place
// refilled when the run gives it back or the lease runs out; at once when no
// child is left ready or other runs are going.
func TestWarmPoolLease(t *testing.T) {
	m := check(t, func(c *Config) { c.WarmPool = 2 })
	p := m.warm
	p.mu.Lock()
	p.lease = time.Hour
	p.mu.Unlock()
	counts := func() (ready, spawning int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.ready), p.spawning
	}
	waitReady := func(want int) {
		t.Helper()
		poolUntil(t, p, fmt.Sprintf("settled at %d ready", want), func(p *warmPool) bool { return len(p.ready) == want && p.spawning == 0 })
	}
	var taken []*worker
	t.Cleanup(func() {
		for _, w := range taken {
			p.discard(w)
		}
	})
	take := func(alone bool) *worker {
		w := p.take(alone)
		if w == nil {
			t.Fatal("no warm child to take")
		}
		taken = append(taken, w)
		return w
	}
	waitReady(2)
	a := take(true)
	time.Sleep(300 * time.Millisecond)
	if ready, spawning := counts(); ready != 1 || spawning != 0 {
		t.Fatalf("while a run holds its place: %d ready, %d spawning; want 1, 0", ready, spawning)
	}
	b := take(true) // none left ready: one is started at once
	waitReady(1)
	a.release() // b still holds its place
	time.Sleep(300 * time.Millisecond)
	waitReady(1)
	b.release()
	waitReady(2)
	b.release() // a second release is a no-op
	time.Sleep(100 * time.Millisecond)
	waitReady(2)

	take(false) // other runs are going: refilled at once
	waitReady(2)

	p.mu.Lock()
	p.lease = 50 * time.Millisecond
	p.mu.Unlock()
	take(true)
	waitReady(2) // the lease ran out without a release
}

// TestWarmPoolTakeWaitsForRefill: a run that finds no child ready while a
// refill is under way gets that refill's child; another run finding the same
// (that refill already claimed) spawns its own at once; stopping the pool
// releases a waiting run empty-handed.
func TestWarmPoolTakeWaitsForRefill(t *testing.T) {
	m := check(t, func(c *Config) { c.WarmPool = 1 })
	p := m.warm
	var taken []*worker
	t.Cleanup(func() {
		for _, w := range taken {
			p.discard(w)
		}
	})
	// hold makes the next refills wait until the returned release is called.
	// The pool's lock orders the write before the filler's next read of m.start.
	start := m.start
	hold := func() (release func()) {
		gate := make(chan struct{})
		p.mu.Lock()
		m.start = func(spec child.Spec) (*child.Process, error) { <-gate; return start(spec) }
		p.mu.Unlock()
		release = sync.OnceFunc(func() { close(gate) })
		t.Cleanup(release)
		return release
	}
	poolUntil(t, p, "settled at one ready", func(p *warmPool) bool { return len(p.ready) == 1 && p.spawning == 0 })
	release := hold()
	taken = append(taken, p.take(false))
	poolUntil(t, p, "had a refill under way", func(p *warmPool) bool { return p.spawning == 1 })

	got := make(chan *worker, 1)
	go func() { got <- p.take(false) }()
	poolUntil(t, p, "had a run waiting", func(p *warmPool) bool { return p.waiting == 1 })
	if w := p.take(false); w != nil {
		taken = append(taken, w)
		t.Fatal("a second run waited for a refill the first one waits for")
	}
	release()
	select {
	case w := <-got:
		if w == nil {
			t.Fatal("the waiting run got no child from the refill")
		}
		taken = append(taken, w)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting run never got the refill's child")
	}

	poolUntil(t, p, "settled at one ready", func(p *warmPool) bool { return len(p.ready) == 1 && p.spawning == 0 })
	hold()
	taken = append(taken, p.take(false))
	poolUntil(t, p, "had a refill under way", func(p *warmPool) bool { return p.spawning == 1 })
	go func() { got <- p.take(false) }()
	poolUntil(t, p, "had a run waiting", func(p *warmPool) bool { return p.waiting == 1 })
	p.stop()
	select {
	case w := <-got:
		if w != nil {
			taken = append(taken, w)
			t.Fatal("a run waiting when the pool stopped got a child")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stopping the pool left a run waiting")
	}
}

// TestRunDirGoneAtResponse: the run directory is removed before the response
// is delivered, also when the program closed its descriptors (which starts
// the early removal pass) and races that pass by creating files.
func TestRunDirGoneAtResponse(t *testing.T) {
	m := check(t, nil)
	cases := map[string]string{
		"done": "import os\nos.write(1, os.getcwd().encode() + b'\\n')\nreturn 1",
		// Keeps creating files while the early pass removes the directory.
		"racing": `import os, time
os.write(1, os.getcwd().encode() + b'\n')
for fd in (1, 2, 3):
    os.close(fd)
end = time.monotonic() + 0.5
i = 0
while time.monotonic() < end:
    try:
        open("f%d" % i, "w").close()
    except OSError:
        pass
    i += 1`,
	}
	for name, program := range cases {
		t.Run(name, func(t *testing.T) {
			gone := make(chan error, 1)
			_, err := m.Submit(`"`+name+`"`, protocol.RunParams{Program: program}, newFake(nil), func(res protocol.Result) {
				if len(res.Logs) == 0 {
					gone <- fmt.Errorf("no log line naming the directory: %s", describe(res))
					return
				}
				_, err := os.Stat(res.Logs[0])
				if !os.IsNotExist(err) {
					err = fmt.Errorf("run directory %s at the response: stat error %v", res.Logs[0], err)
				} else {
					err = nil
				}
				gone <- err
			})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-gone:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no result after 30s")
			}
		})
	}
}

// TestWarmPoolFailing: a pool that cannot spawn backs off and logs; runs go
// cold and report the spawn error; Shutdown stops the back-off at once.
func TestWarmPoolFailing(t *testing.T) {
	m := check(t, func(c *Config) { c.WarmPool = 1; c.Python = filepath.Join(t.TempDir(), "nope", "python3") })
	time.Sleep(300 * time.Millisecond) // a few failed refills
	res, fc, el := execute(t, m, tcase{name: "cold", program: "return 1"})
	tcase{kind: protocol.KindWorkerExit, contains: []string{"python spawn error: "}}.verify(t, res, fc, el)
	start := time.Now()
	m.Shutdown()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Shutdown took %v with a backing-off pool", d)
	}
}

// TestCancelStarting: a run cancelled right after Submit (queued, starting or
// live) settles abort exactly once, and nothing leaks.
func TestCancelStarting(t *testing.T) {
	m := check(t, func(c *Config) { c.MaxConcurrent = 2 })
	for i := range 10 {
		ch := make(chan protocol.Result, 2)
		r, err := m.Submit(fmtInt(i), protocol.RunParams{Program: "import time\ntime.sleep(10)"}, newFake(nil),
			func(res protocol.Result) { ch <- res })
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i*7) * time.Millisecond)
		r.Cancel()
		res := recv(t, ch)
		if res.Error == nil || res.Error.Kind != protocol.KindAbort || res.Error.Message != protocol.MsgCancelled {
			t.Errorf("run %d: %s", i, describe(res))
		}
		select {
		case extra := <-ch:
			t.Errorf("second result: %s", describe(extra))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// syncClient answers every binding/call inline, before CallBinding returns.
type syncClient struct{ calls atomic.Int64 }

func (c *syncClient) CallBinding(_, _, _ string, args []byte, answer func(Answer)) func() {
	c.calls.Add(1)
	answer(Answer{HasResult: true, Result: args})
	return func() {}
}

func (c *syncClient) Log(string, protocol.LogEvent) {}
func (c *syncClient) Flush()                        {}

// TestSyncAnswer: an answer invoked synchronously inside CallBinding (allowed
// by the Client contract) works, also for a burst above the 1024 slots.
func TestSyncAnswer(t *testing.T) {
	m := check(t, nil)
	c := &syncClient{}
	ch := make(chan protocol.Result, 1)
	_, err := m.Submit("1", protocol.RunParams{Bindings: tools("echo"), Stream: true,
		Program: "import asyncio\nr = await asyncio.gather(*(tools.echo(i) for i in range(1500)))\nprint(sum(r))\nreturn len(r)"},
		c, func(r protocol.Result) { ch <- r })
	if err != nil {
		t.Fatal(err)
	}
	res := recv(t, ch)
	tcase{value: "1500", logs: []string{"1124250"}, nCalls: -1}.verify(t, res, newFake(nil), 0)
	if res.Stats.BindingCalls != 1500 || c.calls.Load() != 1500 {
		t.Errorf("bindingCalls = %d, client saw %d", res.Stats.BindingCalls, c.calls.Load())
	}
}
