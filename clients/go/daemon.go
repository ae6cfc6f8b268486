package coderun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/sourcegraph/jsonrpc2"
)

// stderrTail is how much of the daemon's log the client keeps when
// Options.Stderr is nil.
const stderrTail = 8 << 10

// FindDaemon returns the daemon binary Start would run without
// Options.Command: $CODERUN_RPC_BIN when set (it must be an executable
// file), else coderun-rpc on PATH. The error names each place tried and why.
func FindDaemon() (string, error) {
	var tried []string
	if bin := os.Getenv("CODERUN_RPC_BIN"); bin != "" {
		path, err := exec.LookPath(bin)
		if err == nil {
			return path, nil
		}
		tried = append(tried, fmt.Sprintf("CODERUN_RPC_BIN=%s: %v", bin, err))
	}
	path, err := exec.LookPath("coderun-rpc")
	if err == nil {
		return path, nil
	}
	tried = append(tried, fmt.Sprintf("coderun-rpc on PATH: %v", err))
	return "", fmt.Errorf("coderun: daemon not found (%s)", strings.Join(tried, "; "))
}

// Start runs the daemon over stdio and performs initialize. ctx bounds the
// start, not the daemon's life: Close ends that.
func Start(ctx context.Context, opts Options) (*Client, error) {
	argv := opts.Command
	if len(argv) == 0 {
		bin, err := FindDaemon()
		if err != nil {
			return nil, err
		}
		argv = []string{bin}
	}
	d, stream, err := startDaemon(argv, opts)
	if err != nil {
		return nil, err
	}
	c, err := newClient(ctx, stream, opts, d, true)
	if err != nil {
		_ = d.wait()
		return nil, err
	}
	return c, nil
}

// daemon is a daemon process this client started.
type daemon struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	tail  *tailBuffer // nil when the log goes to Options.Stderr

	waitOnce sync.Once
	waitErr  error
	exited   chan struct{}
}

func startDaemon(argv []string, opts Options) (*daemon, jsonrpc2.ObjectStream, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), opts.Env...)
	d := &daemon{cmd: cmd, exited: make(chan struct{})}
	if opts.Stderr != nil {
		cmd.Stderr = opts.Stderr
	} else {
		d.tail = &tailBuffer{}
		cmd.Stderr = d.tail
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("coderun: starting the daemon %s: %w", argv[0], err)
	}
	d.stdin = stdin
	go func() { _ = d.wait() }()
	rw := pipes{Reader: stdout, in: stdin}
	return d, NewObjectStream(rw), nil
}

// pipes is the daemon's stdout and stdin as one stream; closing it closes
// stdin, which the daemon takes as the end of the conversation.
type pipes struct {
	io.Reader
	in io.WriteCloser
}

func (p pipes) Write(b []byte) (int, error) { return p.in.Write(b) }
func (p pipes) Close() error                { return p.in.Close() }

func (d *daemon) closeInput() { _ = d.stdin.Close() }

// wait reaps the daemon once and returns its exit error.
func (d *daemon) wait() error {
	d.waitOnce.Do(func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	})
	<-d.exited
	return d.waitErr
}

// exitNote describes a daemon that has exited: its status and the last
// lines of its log. It is "" while the daemon runs.
func (d *daemon) exitNote() string {
	select {
	case <-d.exited:
	default:
		return ""
	}
	note := "the daemon exited"
	var exit *exec.ExitError
	if errors.As(d.waitErr, &exit) {
		note = "the daemon " + exit.ProcessState.String()
	}
	if d.tail != nil {
		if log := strings.TrimSpace(d.tail.String()); log != "" {
			note += " (stderr: " + log + ")"
		}
	}
	return note
}

// tailBuffer keeps the last stderrTail bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
