//go:build linux

package forkserver

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/childtest"
	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

// startRealForkServer stages the repository's py/ files (the real fork
// server and the bootstrap its children run) and starts the server.
func startRealForkServer(t *testing.T) *Server {
	t.Helper()
	python := childtest.RealPython(t)
	dir := t.TempDir()
	for _, name := range []string{"forkserver.py", "bootstrap.py", "protocol.py"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "py", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Start(child.Spec{Path: python, Args: []string{"-u", "-I", filepath.Join(dir, "forkserver.py")},
		Env: []string{"TMPDIR=" + dir, leakcheck.Tag()}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// startFakeForkServer runs a Python script as the server: it receives one
// spawn request, closes the descriptors, then does what body says with the
// control socket `ctl`.
func startFakeForkServer(t *testing.T, body string) *Server {
	t.Helper()
	script := "import os, socket, time\nctl = socket.socket(fileno=3)\n" +
		"msg, anc, _, _ = ctl.recvmsg(65536, socket.CMSG_SPACE(16))\n" +
		"for _, _, data in anc:\n    for i in range(0, len(data), 4):\n        os.close(int.from_bytes(data[i:i+4], 'little'))\n" +
		body
	s, err := Start(child.Spec{Path: childtest.RealPython(t), Args: []string{"-I", "-c", script},
		Env: []string{leakcheck.Tag()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func forkSpec(t *testing.T) Spec {
	dir := t.TempDir()
	return Spec{Argv: []string{filepath.Join(dir, "bootstrap.py")}, Env: []string{"TMPDIR=" + dir, leakcheck.Tag()}, Dir: dir}
}

// A forked child is wired like a started one and leads its own session; its
// relayed exit carries the code, and a group SIGKILL is relayed by name.
func TestForkServerSpawnAndRelay(t *testing.T) {
	leakcheck.Check(t)
	s := startRealForkServer(t)

	p, err := s.Spawn(forkSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if sid, _ := unix.Getsid(p.Pid); sid != p.Pid {
		t.Errorf("sid %d, want the child's own pid %d", sid, p.Pid)
	}
	if ppid := parentOf(t, p.Pid); ppid != s.Pid() {
		t.Errorf("parent %d, want the server %d", ppid, s.Pid())
	}
	// The bootstrap waits for its boot frame; closing fd 3 makes it fail: an
	// uncaught exception, printed on fd 2, exit status 1.
	p.Conn.Close()
	stderr := childtest.ReadAllWithin(t, p.Stderr, 10*time.Second)
	e := childtest.WaitExit(t, p, 10*time.Second)
	if e.Code != 1 || e.Signaled || !strings.Contains(string(stderr), "fd 3 closed before the boot frame") {
		t.Errorf("exit %+v, stderr %q", e, stderr)
	}
	spawn.CloseFiles(p.Stdout, p.Stderr)

	p, err = s.Spawn(forkSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	p.SignalGroup(syscall.SIGKILL)
	if e := childtest.WaitExit(t, p, 10*time.Second); e.Signal != "SIGKILL" || e.Code != -1 {
		t.Errorf("exit %+v, want SIGKILL", e)
	}
	spawn.CloseFiles(p.Conn, p.Stdout, p.Stderr)
}

// When the server dies, its children die with it (parent-death signal) and a
// pending Wait reports ErrDown instead of hanging.
func TestForkServerDeathEndsChildren(t *testing.T) {
	leakcheck.Check(t)
	s := startRealForkServer(t)
	p, err := s.Spawn(forkSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer spawn.CloseFiles(p.Conn, p.Stdout, p.Stderr)
	unix.Kill(s.Pid(), syscall.SIGKILL)
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the server died")
	}
	if _, err := p.Wait(); !errors.Is(err, ErrDown) {
		t.Errorf("Wait: %v, want ErrDown", err)
	}
	// Orphaned, the child is reparented to this test binary (a subreaper),
	// once the server has finished exiting.
	for deadline := time.Now().Add(5 * time.Second); parentOf(t, p.Pid) != os.Getpid(); {
		if time.Now().After(deadline) {
			t.Fatalf("child %d not reparented to the test binary", p.Pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ws := childtest.ReapPid(t, p.Pid, 5*time.Second); ws.Signal() != syscall.SIGKILL {
		t.Errorf("child %d: %v, want killed by its parent-death signal", p.Pid, ws)
	}
	if _, err := s.Spawn(forkSpec(t)); !errors.Is(err, ErrDown) {
		t.Errorf("Spawn after death: %v", err)
	}
}

// A server that breaks the protocol is killed; Spawn fails cleanly.
func TestForkServerHostileReplies(t *testing.T) {
	for name, body := range map[string]string{
		"garbage":      "ctl.send(b'hello')\ntime.sleep(30)",
		"pid 1":        "ctl.send(b'P 1 1 5')\ntime.sleep(30)",
		"extra field":  "ctl.send(b'P 1 100 5 7')\ntime.sleep(30)",
		"oversized":    "ctl.send(b'P 1 ' + b'9' * 600)\ntime.sleep(30)",
		"two replies":  "ctl.send(b'E 1 11 again')\nctl.send(b'E 1 11 again')\ntime.sleep(30)",
		"wrong seq":    "ctl.send(b'P 2 100 5')\ntime.sleep(30)",
		"exits":        "pass",
		"raises":       "raise SystemError('server broke')",
		"negative pid": "ctl.send(b'P 1 -5 5')\ntime.sleep(30)",
	} {
		t.Run(name, func(t *testing.T) {
			leakcheck.Check(t)
			s := startFakeForkServer(t, body)
			p, err := s.Spawn(forkSpec(t))
			if name == "two replies" {
				if err == nil || !strings.Contains(err.Error(), "fork: 11 again") {
					t.Fatalf("first reply: %v", err)
				}
				p, err = s.Spawn(forkSpec(t))
			}
			if err == nil {
				spawn.CloseFiles(p.Conn, p.Stdout, p.Stderr)
				t.Fatalf("Spawn succeeded against %s", name)
			}
			if !errors.Is(err, ErrDown) {
				t.Errorf("Spawn: %v, want ErrDown", err)
			}
			if name == "raises" && !strings.Contains(err.Error(), "SystemError: server broke") {
				t.Errorf("Spawn: %v, want the server's last words", err)
			}
			select {
			case <-s.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("server not ended")
			}
		})
	}
}

// A server that never replies is killed after the reply deadline.
func TestForkServerSilent(t *testing.T) {
	leakcheck.Check(t)
	old := spawnReplyTimeout
	spawnReplyTimeout = 300 * time.Millisecond
	defer func() { spawnReplyTimeout = old }()
	s := startFakeForkServer(t, "time.sleep(30)")
	if _, err := s.Spawn(forkSpec(t)); !errors.Is(err, ErrDown) ||
		!strings.Contains(err.Error(), "no reply to a spawn") {
		t.Errorf("Spawn: %v", err)
	}
}

func TestSpawnRequestRefusesAmbiguousFields(t *testing.T) {
	for _, spec := range []Spec{
		{Argv: []string{"a"}},
		{Argv: nil, Dir: "/tmp"},
		{Argv: []string{""}, Dir: "/tmp"},
		{Argv: []string{"a\x00b"}, Dir: "/tmp"},
		{Argv: []string{"a"}, Env: []string{""}, Dir: "/tmp"},
		{Argv: []string{strings.Repeat("x", maxSpawnRequest)}, Dir: "/tmp"},
	} {
		if _, err := spawnRequest(1, spec); err == nil {
			t.Errorf("spawnRequest(%+v) accepted", spec)
		}
	}
	b, err := spawnRequest(7, Spec{Argv: []string{"a", "b"}, Env: []string{"K=v"}, Dir: "/d"})
	if err != nil || string(b) != "S7\x00/d\x00a\x00b\x00\x00K=v" {
		t.Errorf("spawnRequest = %q, %v", b, err)
	}
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

func TestMain(m *testing.M) { childtest.Main(m) }
