package e2e

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A client that stopped reading stdout cannot keep the daemon alive: after
// SIGTERM (or stdin EOF) it tears down and exits 0 even though its writes
// block (each write is bounded once teardown starts).
func TestStalledClient(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"SIGTERM", "EOF"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(daemonBin)
			cmd.Env = environ(t, map[string]string{"CODERUN_GRACE_MS": "200", "CODERUN_LOG_LEVEL": "warn"})
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe() // never read after initialize
			defer stdout.Close()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			stdin.Write(frame(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`))
			// the answer to initialize: the daemon is up and handles SIGTERM
			// (on a loaded machine a -race build can take seconds to get there)
			seen := ""
			for buf := make([]byte, 4096); !strings.Contains(seen, `"result"`); {
				n, err := stdout.Read(buf)
				if err != nil {
					t.Fatalf("reading the answer to initialize: %v (read %q)", err, seen)
				}
				seen += string(buf[:n])
			}
			stdin.Write(frame(`{"jsonrpc":"2.0","id":2,"method":"run","params":{"stream":true,"program":"import os\nprint(os.getpid(), flush=True)\nwhile True:\n    print('x' * 100)"}}`))
			time.Sleep(2 * time.Second) // the pipe to the client is full by now
			if how == "SIGTERM" {
				cmd.Process.Signal(syscall.SIGTERM)
			} else {
				stdin.Close()
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatal("the daemon hung on a client that does not read")
			}
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("exit code %d", code)
			}
		})
	}
}
