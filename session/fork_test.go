package session

import (
	"bufio"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// sessionChild drives a session child's fd 3 by hand (the session runs of
// the daemon are not this file's): a session boot, then run frames.
type sessionChild struct {
	t testing.TB
	w *worker
	r *bufio.Reader
}

func newSessionChild(t testing.TB, w *worker, boot bool) *sessionChild {
	s := &sessionChild{t: t, w: w, r: bufio.NewReader(w.conn)}
	if boot {
		s.send(`{"type":"boot","cpuSeconds":3600,"addressSpaceBytes":4294967296,"maxLogBytes":65536,` +
			`"maxValueBytes":65536,"maxOutputBytes":65536,"namespaces":[],"session":true}`)
		if line := s.line(); !strings.Contains(line, `"boot-ack"`) {
			t.Fatalf("boot answered %q", line)
		}
	}
	return s
}

func (s *sessionChild) send(frame string) {
	s.w.conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := s.w.conn.Write([]byte(frame + "\n")); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sessionChild) line() string {
	s.w.conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	line, err := s.r.ReadString('\n')
	if err != nil {
		s.t.Fatalf("reading fd 3: %v", err)
	}
	return line
}

// run runs program and returns the done frame's value as JSON text.
func (s *sessionChild) run(program string) string {
	s.t.Helper()
	prog, _ := json.Marshal(program)
	s.send(`{"type":"run","program":` + string(prog) + `,"cpuSeconds":30,"maxLogBytes":65536,"maxValueBytes":65536}`)
	for {
		var f struct {
			Type  string
			Value json.RawMessage
			Error json.RawMessage
		}
		if err := json.Unmarshal([]byte(s.line()), &f); err != nil || f.Type != "done" {
			continue
		}
		if f.Error != nil {
			s.t.Fatalf("run failed: %s", f.Error)
		}
		return string(f.Value)
	}
}

// end closes the child's descriptors (an idle session child exits at end of
// stream) and returns its relayed exit.
func (s *sessionChild) end() child.Exit {
	s.w.closeFiles()
	select {
	case <-s.w.exited:
	case <-time.After(20 * time.Second):
		s.w.proc.SignalGroup(syscall.SIGKILL)
		<-s.w.exited
		s.t.Errorf("the session child did not exit at end of stream")
	}
	s.w.closeDir(nil)
	return s.w.exit
}

func startSession(t testing.TB, start startFunc) *sessionChild {
	parent := t.TempDir()
	w, rerr := spawnWorker(realPython(t), nil, nil, func() (*rundir.Dir, error) { return rundir.Make(parent) }, start)
	if rerr != nil {
		t.Fatal(rerr.Message)
	}
	return newSessionChild(t, w, true)
}

// forkSource starts a session child from a fork server of its own (the
// reaper that adopts its forks); both end when the test does.
func forkSource(t testing.TB) *sessionChild {
	f := newForker(realPython(t), t.TempDir(), nil, slog.New(slog.DiscardHandler), nil, nil)
	t.Cleanup(f.close)
	src := startSession(t, f.spawn)
	t.Cleanup(func() { src.end() })
	return src
}

// A fork sees the source's state, runs in its own copied directory, group
// and channel, and diverges; closing it leaves the source running, and
// each ends at end of stream with its exit relayed by the fork server.
func TestForkWorker(t *testing.T) {
	leakcheck.Check(t)
	src := forkSource(t)
	src.run("import tempfile\ntempfile.gettempdir()\n" + // cached in the source
		"data = list(range(100000))\nopen('notes.txt', 'w').write('kept')\nmark = 'source'")
	wd, dir := madeDir(t)
	fw, err := forkWorker(src.w, wd)
	if err != nil {
		t.Fatal(err)
	}
	fork := newSessionChild(t, fw, false)
	got := fork.run("import os, tempfile\nos.write(1, b'to the new stdout')\nmark = 'fork'\n" +
		"return [len(data), open('notes.txt').read(), os.getcwd(), tempfile.gettempdir(), os.getpid(),\n" +
		"        os.getsid(0), sorted(int(f) for f in os.listdir('/proc/self/fd'))]")
	want, _ := json.Marshal([]any{100000, "kept", dir, dir, fw.proc.Pid, fw.proc.Pid, []int{0, 1, 2, 3, 4}})
	if got != string(want) { // 4: the listing's own descriptor
		t.Errorf("fork's view = %s, want %s", got, want)
	}
	buf := make([]byte, 64)
	fw.stdout.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, _ := fw.stdout.Read(buf); string(buf[:n]) != "to the new stdout" {
		t.Errorf("fork's stdout = %q", buf[:n])
	}
	// A pid the fork server already knows is never adopted again, nor its source.
	for _, pid := range []int{fw.proc.Pid, src.w.proc.Pid} {
		if _, err := src.w.proc.Adopt(pid); err == nil {
			t.Errorf("Adopt(%d) of a known process succeeded", pid)
		}
	}
	if got := src.run("return [mark, len(data)]"); got != `["source",100000]` {
		t.Errorf("source after the fork = %s", got)
	}
	if e := fork.end(); e.Code != 0 || e.Signaled {
		t.Errorf("fork's exit = %+v", e)
	}
	if got := src.run("return mark"); got != `"source"` {
		t.Errorf("source after the fork ended = %s", got)
	}
}

// A child not started by the fork server has no reaper that can hand its
// fork over: forkWorker fails, and the fork ends when its channel closes.
func TestForkWorkerNeedsTheForkServer(t *testing.T) {
	leakcheck.Check(t)
	src := startSession(t, child.Start)
	defer src.end()
	src.run("import os\nx = 1")
	wd, _ := madeDir(t)
	_, err := forkWorker(src.w, wd)
	if !errors.Is(err, errForkFailed) || !errors.Is(err, child.ErrNotAdoptable) {
		t.Fatalf("forkWorker of a cold child: %v", err)
	}
	if got := src.run("return x"); got != "1" {
		t.Errorf("source after the failed fork = %s", got)
	}
}

// A fork whose working directory cannot be copied, or whose directory is
// closed, fails naming the reason; the source is unaffected. (The fork's
// own fork-failed frame is pinned by py/tests/test_session.py.)
func TestForkWorkerFailures(t *testing.T) {
	leakcheck.Check(t)
	src := forkSource(t)
	src.run("open('big', 'wb').write(b'x' * 2048)")
	defer func(old int64) { forkCopyMax = old }(forkCopyMax)
	forkCopyMax = 1024
	wd, _ := madeDir(t)
	_, err := forkWorker(src.w, wd)
	if !errors.Is(err, rundir.ErrCopyTooLarge) || !strings.Contains(err.Error(), "copying the working directory") {
		t.Fatalf("fork of a directory over the copy budget: %v", err)
	}
	forkCopyMax = 1 << 30
	closed, _ := madeDir(t)
	closed.Close()
	_, err = forkWorker(src.w, closed)
	if err == nil || !strings.Contains(err.Error(), "bad file descriptor") {
		t.Fatalf("fork into a closed dir: %v", err)
	}
	if got := src.run("return 7"); got != "7" {
		t.Errorf("source after the failed fork = %s", got)
	}
}

// BenchmarkForkWorker100MB forks a session holding ~100 MB of Python
// objects (the target: p50 ≤ 10 ms) and checks the fork's first run
// sees them; the time is forkWorker's, adoption included.
func BenchmarkForkWorker100MB(b *testing.B) {
	src := forkSource(b)
	src.run("data = [str(i) * 3 for i in range(1_400_000)]\n" +
		"import resource\nreturn resource.getrusage(resource.RUSAGE_SELF).ru_maxrss")
	parent := b.TempDir()
	var took []time.Duration
	for b.Loop() {
		wd, err := rundir.Make(parent)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		fw, err := forkWorker(src.w, wd)
		took = append(took, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		fork := newSessionChild(b, fw, false)
		if got := fork.run("return len(data)"); got != "1400000" {
			b.Fatalf("the fork sees %s items", got)
		}
		fork.end()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms/fork")
}

// A session child in tier sandbox keeps its state across runs whose CPU adds
// up past any single run's budget (the init bounds the session's lifetime,
// not the first run's soft limit); its fork, confined by a stacked ruleset,
// is the init's child, adopted from it, and ends leaving the source running.
func TestSandboxSession(t *testing.T) {
	if err := sandbox.Probe(); err != nil {
		t.Skip(err)
	}
	leakcheck.Check(t)
	python, dir := realPython(t), t.TempDir()
	cfg := sandboxFor(python, dir, nil, nil)
	cfg.Session = true
	src := startSession(t, func(spec child.Spec) (*child.Process, error) { return sandbox.Start(spec, cfg) })
	defer src.end()
	// Each run starts with its whole budget left on the clock RLIMIT_CPU is
	// held against (the kernel's tick-charged PROF clock, -8), which runs
	// ahead of the exact CPU time on a loaded machine, more so as the
	// session ages: a soft limit counted from the exact time let the 0.7 s
	// spin of a late run meet SIGXCPU.
	spin := "import resource, time\nroom = resource.getrlimit(resource.RLIMIT_CPU)[0] - time.clock_gettime(-8)\n" +
		"t = time.process_time()\nwhile time.process_time() - t < 0.7:\n    pass\n" +
		"n = globals().get('n', 0) + 1\nreturn [n, room >= 0.9]"
	for i := 1; i <= 4; i++ {
		s, _ := json.Marshal(spin)
		src.send(`{"type":"run","program":` + string(s) + `,"cpuSeconds":1,"maxLogBytes":65536,"maxValueBytes":65536}`)
		if line := src.line(); !strings.Contains(line, `"value": [`+strconv.Itoa(i)+`,true]`) {
			t.Fatalf("run %d: %s", i, line)
		}
	}
	forkWD, forkDir := madeDir(t)
	rules, err := sandbox.ForkRuleset(cfg, python, forkDir, src.w.proc.Pid)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := forkWorker(src.w, forkWD, rules)
	rules.Close()
	if err != nil {
		t.Fatalf("fork in tier sandbox: %v", err)
	}
	fork := newSessionChild(t, fw, false)
	if got := fork.run("import os\nreturn [n, os.getppid(), os.getpid() == os.getsid(0)]"); got != `[4,1,true]` {
		t.Errorf("the fork's view = %s", got)
	}
	if e := fork.end(); e.Code != 0 || e.Signaled {
		t.Errorf("the fork's exit = %+v", e)
	}
	if got := src.run("return n"); got != "4" {
		t.Errorf("the source after its fork ended = %s", got)
	}
}
