package serve

import (
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// A token-less WebSocket listener answers only its own loopback Host:
// names an attacker can rebind, other ports and lookalikes are refused.
func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.7:8080": true, "[::1]:8080": true, "localhost:8080": true, "LocalHost:8080": true,
		"evil.example:8080": false, "127.0.0.1.evil.example:8080": false, "localhost.evil.example:8080": false,
		"127.0.0.1:8081": false, "127.0.0.1": false, "localhost": false, "[::1]": false, "10.0.0.1:8080": false,
		"0.0.0.0:8080": false, "[::]:8080": false, "": false, ":8080": false,
	} {
		if got := loopbackHost(host, "8080"); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// failingListener fails its first fails accepts as a process out of
// descriptors does, then waits to be closed.
type failingListener struct {
	fails  int32
	calls  atomic.Int32
	closed chan struct{}
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.calls.Add(1) <= l.fails {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *failingListener) Close() error   { close(l.closed); return nil }
func (l *failingListener) Addr() net.Addr { return &net.UnixAddr{Name: "test", Net: "unix"} }

// An accept that fails (EMFILE) is tried again after a pause, not given
// up, and stopping ends the loop.
func TestAcceptBacksOff(t *testing.T) {
	leakcheck.Check(t)
	l := &failingListener{fails: 3, closed: make(chan struct{})}
	s := &service{log: slog.New(slog.DiscardHandler), opts: Options{Listen: Addr{Scheme: "unix"}}}
	stop := s.accept(l)
	for deadline := time.Now().Add(30 * time.Second); l.calls.Load() <= l.fails; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("accept called %d times, want the loop to retry past %d failures", l.calls.Load(), l.fails)
		}
	}
	stop()
	if got := l.calls.Load(); got != l.fails+1 {
		t.Errorf("accept called %d times, want %d", got, l.fails+1)
	}
}
