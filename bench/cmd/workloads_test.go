package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// The workloads group's own parts (docs/test-catalogue.md C880–C885). The
// whole group runs, with a real daemon, in make test-bench.

func TestMain(m *testing.M) { os.Exit(leakcheck.Suite(m)) }

// workloadByName finds one of the group's workloads.
func workloadByName(t *testing.T, prefix string) workload {
	_, rows := workloadCSV()
	for _, w := range workloads(rows) {
		if strings.HasPrefix(w.name, prefix) {
			return w
		}
	}
	t.Fatalf("no workload %s", prefix)
	return workload{}
}

// C880: a host's answer counts only with the workload's value, and W2's
// only with an image/png among its displays.
func TestWorkloadCheckC880(t *testing.T) {
	csv, rows := workloadCSV()
	if len(csv) > 1<<20 || len(csv) < 1<<20-64 || !strings.HasSuffix(csv, "\n") {
		t.Fatalf("in.csv is %d bytes (want whole lines filling 1 MiB)", len(csv))
	}
	if got := strings.Count(csv, "\n") - 1; got != rows {
		t.Fatalf("in.csv has %d rows, workloadCSV says %d", got, rows)
	}
	for _, w := range workloads(rows) {
		good := outcome{value: w.want}
		if w.png {
			good.displays = [][]string{{"image/png", "text/plain"}}
		}
		if err := w.check(good); err != nil {
			t.Errorf("%s: the expected outcome is refused: %v", w.name, err)
		}
		if err := w.check(outcome{value: w.want + "0", displays: good.displays}); err == nil {
			t.Errorf("%s: a wrong value is accepted", w.name)
		}
	}
	w2 := workloadByName(t, "W2")
	if err := w2.check(outcome{value: w2.want, displays: [][]string{{"text/plain"}}}); err == nil {
		t.Error("W2 without an image/png is accepted")
	}
}

// C881: under python -c, a reference's source computes what the daemon
// returns: W4's value, and W3's 100 gathered calls answered by the echo
// socket (pipelined, as through the daemon) with its JSON transform.
func TestReferenceSourceUnderPythonC881(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "tools.sock")
	echo, err := startEchoSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer echo.stop()
	h := &pythonCHost{python: "python3", dir: dir, socket: sock}
	for _, prefix := range []string{"W3", "W4"} {
		w := workloadByName(t, prefix)
		got, _, err := h.once(w)
		if err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		if err := w.check(got); err != nil {
			t.Error(err)
		}
	}
	failing := workload{name: "raises", program: "raise ValueError('no such column')"}
	if _, _, err := h.once(failing); err == nil || !strings.Contains(err.Error(), "ValueError: no such column") {
		t.Errorf("a reference run that raised gave %v, want its exception", err)
	}
}

// C882: the group is skipped, with the reason, without an interpreter that
// has pandas and matplotlib; the Jupyter reference is left out, with the
// reason, when the interpreter lacks ipykernel.
func TestWorkloadsSkippedWithTheReasonC882(t *testing.T) {
	leakcheck.Check(t)
	rows, err := workloadsRows(options{workloadPython: filepath.Join(t.TempDir(), "python")})
	if err != nil || rows != nil {
		t.Fatalf("without an interpreter the group gave %d rows and %v, want none and no error", len(rows), err)
	}
	if _, why := workloadPython("/nonexistent/python"); !strings.Contains(why, "no interpreter /nonexistent/python") {
		t.Errorf("the reason is %q", why)
	}
	if got := lacks("python3", "json", "no_such_module_c882", "asyncio"); got != "no_such_module_c882" {
		t.Errorf("lacks = %q, want the one module python3 cannot find", got)
	}
	noKernel := filepath.Join(t.TempDir(), "python")
	script := "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'ipykernel'\" >&2\nexit 1\n"
	if err := os.WriteFile(noKernel, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = startJupyter(noKernel, t.TempDir(), "", "")
	if err == nil || !strings.Contains(err.Error(), "No module named 'ipykernel'") || !strings.Contains(err.Error(), "bench/requirements.txt") {
		t.Errorf("startJupyter without ipykernel: %v", err)
	}
}

// C883: the fork server is found among the daemon's children by its
// command line, whatever the children's names hold (a name with ") (" in
// it cannot shift /proc/<pid>/stat's fields).
func TestForkServerPidsC883(t *testing.T) {
	leakcheck.Check(t)
	py, err := realPython("python3") // not a pyenv shim, whose own children carry the arguments
	if err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(t.TempDir(), "x) 7 (y")
	if err := os.Symlink(py, odd); err != nil {
		t.Fatal(err)
	}
	wait := "import sys; sys.stdin.read()"
	other := exec.Command(odd, "-c", wait)
	server := exec.Command(odd, "-c", wait, "forkserver.py")
	for _, c := range []*exec.Cmd{other, server} {
		in, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { in.Close(); _ = c.Wait() }()
	}
	if got := parentPid(server.Process.Pid); got != os.Getpid() {
		t.Errorf("parentPid = %d, want %d", got, os.Getpid())
	}
	if got := forkServerPids(os.Getpid()); !slices.Equal(got, []int{server.Process.Pid}) {
		t.Errorf("forkServerPids = %v, want [%d] (the other child is %d)", got, server.Process.Pid, other.Process.Pid)
	}
	if got := forkServerPids(server.Process.Pid); got != nil {
		t.Errorf("forkServerPids of a process without children = %v", got)
	}
}

// C884: the echo socket answers a burst of calls written at once, each
// with its id and its args, and stop ends a connection still open.
func TestEchoSocketAnswersABurstC884(t *testing.T) {
	leakcheck.Check(t)
	sock := filepath.Join(t.TempDir(), "tools.sock")
	echo, err := startEchoSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var burst strings.Builder
	for i := range 100 {
		fmt.Fprintf(&burst, "{\"id\": %d, \"args\": {\"i\": [%d, \"x\"]}}\n", i, i)
	}
	if _, err := c.Write([]byte(burst.String())); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for i := range 100 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"id":%d,"result":{"i":[%d,"x"]}}`+"\n", i, i); line != want {
			t.Fatalf("answer %d is %q, want %q", i, line, want)
		}
	}
	echo.stop()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadByte(); err == nil {
		t.Error("the connection is still open after stop")
	}
}

// C885: a cell's p50 is over every sample; its spread is the lowest and
// highest of the rounds' own p50s.
func TestSummariseC885(t *testing.T) {
	ms := func(v ...int) samples {
		var s samples
		for _, x := range v {
			s = append(s, time.Duration(x)*time.Millisecond)
		}
		return s
	}
	c := summarise([]samples{ms(10, 11, 90), ms(30), ms(5, 6, 7)})
	if c.p50 != 10*time.Millisecond || c.low != 6*time.Millisecond || c.high != 30*time.Millisecond || c.n != 7 {
		t.Errorf("summarise = %+v, want p50 10 ms, rounds' p50 6–30 ms, 7 samples", c)
	}
	if c := summarise(nil); c != (cell{}) {
		t.Errorf("summarise(nil) = %+v", c)
	}
}
