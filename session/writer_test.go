package session

import (
	"os"
	"slices"
	"syscall"
	"testing"
)

// The writer finishes a reply that an inline write left cut before the run
// frame or any queued reply, so no frame lands inside another.
func TestWriterFinishesCutReplyFirst(t *testing.T) {
	wr := &fdWriter{}
	wr.cond.L = &wr.mu
	wr.rest, wr.run, wr.q = []byte("ly}\n"), []byte("run\n"), [][]byte{[]byte("queued\n")}
	var got []string
	for range 3 {
		frame, _, _ := wr.next()
		got = append(got, string(frame))
		wr.busy = false // the write completed
	}
	if want := []string{"ly}\n", "run\n", "queued\n"}; !slices.Equal(got, want) {
		t.Errorf("write order %q, want %q", got, want)
	}
}

// socketPair is a connected AF_UNIX stream pair as files (fd 3 and the
// child's end).
func socketPair(t *testing.T) (daemon, child *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	daemon, child = os.NewFile(uintptr(fds[0]), "fd3"), os.NewFile(uintptr(fds[1]), "child")
	t.Cleanup(func() { daemon.Close(); child.Close() })
	return daemon, child
}

// A run frame that finds fd 3 idle is written by the caller, before any
// writer goroutine runs.
func TestWriterSendsRunInline(t *testing.T) {
	daemon, child := socketPair(t)
	wr := newFDWriter(daemon, nil, 4)
	wr.sendRun([]byte("run\n"))
	buf := make([]byte, 16)
	n, err := child.Read(buf)
	if err != nil || string(buf[:n]) != "run\n" {
		t.Fatalf("child read %q, %v", buf[:n], err)
	}
	wr.stop()
	if fail := wr.loop(func() {}); fail != nil {
		t.Errorf("stopped loop failed: %+v", fail)
	}
}

// A run frame whose inline write fails is the handshake's failure, reported
// by the loop.
func TestWriterInlineRunFailureIsTheHandshakes(t *testing.T) {
	daemon, child := socketPair(t)
	child.Close()
	wr := newFDWriter(daemon, nil, 4)
	wr.sendRun([]byte("run\n"))
	fail := wr.loop(func() {})
	if fail == nil || !fail.handshake || fail.stopped {
		t.Fatalf("loop ended with %+v, want a handshake failure", fail)
	}
}
