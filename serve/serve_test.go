package serve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/session"
)

// C1114: serve hosts whatever server main injects, without package rpc:
// each admitted connection reaches ServeConn with its streams and its own
// lane as Runner and Sessions; the end of the client's input ends c.In;
// FellBehind ends the connection for the client; and the service drains
// with the injected servers returned.
func TestC1114ServeConnIsInjected(t *testing.T) {
	leakcheck.Check(t)
	sock := filepath.Join(t.TempDir(), "s.sock")
	served := make(chan error, 4)
	opts := Options{
		Listen: Addr{Scheme: "unix", Where: sock}, MaxConnections: 4, MaxRunsPerConnection: 1,
		Drain: 10 * time.Second, WriteStall: 10 * time.Second, MaxUnauthenticated: 4, AuthTimeout: 10 * time.Second,
		Manager:   session.NewManager(session.Config{Python: "python3", TempDir: t.TempDir()}),
		RunSlots:  1,
		Unsent:    func() int64 { return 0 },
		ServeConn: func(c Conn) int { served <- lineServer(c); return 0 },
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan int, 1)
	go func() { ran <- Run(ctx, opts) }()

	c := dial(t, sock)
	if got := exchange(t, c, "hello"); got != "lane: true\n" {
		t.Errorf("answer %q, want the connection's lane", got)
	}
	_ = c.Close() // the client goes: ServeConn's input ends
	if err := <-served; err != nil {
		t.Errorf("first connection: %v", err)
	}

	c = dial(t, sock)
	if _, err := io.WriteString(c, "fell behind\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a connection left open fails, not hangs
	if rest, err := io.ReadAll(bufio.NewReader(c)); err != nil || len(rest) != 0 {
		t.Errorf("after FellBehind the client read %q, %v; want the end of the connection", rest, err)
	}
	_ = c.Close()
	if err := <-served; err != nil {
		t.Errorf("second connection: %v", err)
	}

	cancel()
	if code := <-ran; code != 0 {
		t.Errorf("Run = %d, want 0", code)
	}
}

// lineServer is an injected server: it answers each line whether it was
// given a lane, or calls FellBehind for "fell behind"; it returns once its
// input ends.
func lineServer(c Conn) error {
	if c.Runner == nil || c.Sessions == nil || c.Log == nil || c.FellBehind == nil {
		return errors.New("a Conn without its lane, logger or FellBehind")
	}
	lines := bufio.NewScanner(c.In)
	for lines.Scan() {
		if lines.Text() == "fell behind" {
			c.FellBehind()
			continue
		}
		if _, err := io.WriteString(c.Out, "lane: "+boolText(!c.Runner.QueueFull())+"\n"); err != nil {
			return err
		}
	}
	return nil // the end of input, whichever way it came
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// dial connects to the service's socket once it is listening.
func dial(t *testing.T, sock string) net.Conn {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("unix", sock)
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service never listened on %s: %v", sock, err)
		}
	}
}

// exchange writes line and returns the one line answered.
func exchange(t *testing.T, c net.Conn, line string) string {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer to %q: %v", line, err)
	}
	return got
}
