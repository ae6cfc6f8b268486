//go:build linux

package childtest

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

func TestBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// StartStandIn starts this test binary as a stand-in daemon with env (and
// attr, if any; its stderr is the test's) and returns it with its stdout. At
// cleanup it is killed and reaped.
func StartStandIn(t *testing.T, env []string, attr *syscall.SysProcAttr) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(TestBinary(t))
	// A stand-in daemon is a daemon a test starts: what it creates goes
	// under the test's own directory (and is removed with it).
	cmd.Env = append(env, "TMPDIR="+t.TempDir())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = attr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, out
}

func HelperSpec(t *testing.T, mode string, args ...string) child.Spec {
	return child.Spec{Path: TestBinary(t), Args: args, Env: []string{HelperVar + "=" + mode, leakcheck.Tag()}}
}

// StartHelper starts a helper and registers a cleanup that kills its group,
// reaps it (unless the test did) and closes the daemon's ends.
func StartHelper(t *testing.T, mode string, args ...string) *child.Process {
	t.Helper()
	p, err := child.Start(HelperSpec(t, mode, args...))
	if err != nil {
		t.Fatalf("Start(%s): %v", mode, err)
	}
	t.Cleanup(func() { Discard(p) })
	return p
}

func Discard(p *child.Process) {
	p.SignalGroup(syscall.SIGKILL)
	p.Wait()
	p.Conn.Close()
	p.Stdout.Close()
	p.Stderr.Close()
}

// ReadLine reads one line byte by byte (no read-ahead) within timeout.
func ReadLine(t *testing.T, f *os.File, timeout time.Duration) string {
	t.Helper()
	f.SetReadDeadline(time.Now().Add(timeout))
	defer f.SetReadDeadline(time.Time{})
	var line []byte
	b := make([]byte, 1)
	for {
		if _, err := f.Read(b); err != nil {
			t.Fatalf("reading a line from %s: %v (got %q)", f.Name(), err, line)
		}
		if b[0] == '\n' {
			return string(line)
		}
		line = append(line, b[0])
	}
}

// WaitExit runs Wait with a timeout.
func WaitExit(t *testing.T, p *child.Process, timeout time.Duration) child.Exit {
	t.Helper()
	type result struct {
		e   child.Exit
		err error
	}
	done := make(chan result, 1)
	go func() { e, err := p.Wait(); done <- result{e, err} }()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Wait: %v", r.err)
		}
		return r.e
	case <-time.After(timeout):
		p.SignalGroup(syscall.SIGKILL)
		<-done
		t.Fatalf("child %d did not exit within %v", p.Pid, timeout)
		return child.Exit{}
	}
}

// ReadAllWithin reads f to end of stream within timeout.
func ReadAllWithin(t *testing.T, f *os.File, timeout time.Duration) []byte {
	t.Helper()
	f.SetReadDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("reading %s to end of stream: %v", f.Name(), err)
	}
	return b
}

// ReapPid waits for a (subreaped) orphan and returns its status.
func ReapPid(t *testing.T, pid int, timeout time.Duration) unix.WaitStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var ws unix.WaitStatus
		n, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err != nil && err != unix.EINTR {
			t.Fatalf("wait4(%d): %v", pid, err)
		}
		if n == pid {
			return ws
		}
		if time.Now().After(deadline) {
			unix.Kill(pid, unix.SIGKILL)
			unix.Wait4(pid, &ws, 0, nil)
			t.Fatalf("process %d still alive after %v", pid, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func GetReport(t *testing.T, p *child.Process) Report {
	t.Helper()
	p.Conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := p.Conn.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.NewDecoder(p.Conn).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

func ReadState(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0], true
}

// HelperCommand is an os/exec helper, killed if it outlives 30 s.
func HelperCommand(t *testing.T, mode string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, TestBinary(t), args...)
	cmd.Env = []string{HelperVar + "=" + mode, leakcheck.Tag()}
	cmd.Stderr = os.Stderr
	return cmd
}

// RealPython resolves python3 (through a version-manager shim) or skips.
func RealPython(t *testing.T) string {
	t.Helper()
	shim, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	out, err := child.Probe(shim, []string{"-I", "-c", "import sys; print(sys.executable)"}, 5*time.Second, 1024)
	if err != nil {
		t.Fatalf("probe %s: %v", shim, err)
	}
	return strings.TrimSpace(string(out))
}
