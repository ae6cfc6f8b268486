package lspclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// daemonBin is $CODERUN_RPC_BIN (make exports it), else a fresh build.
func daemonBin(t *testing.T) string {
	if bin := os.Getenv("CODERUN_RPC_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "coderun-rpc")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/coderun-rpc/coderun-rpc/cmd/coderun-rpc").CombinedOutput()
	if err != nil {
		t.Fatalf("building the daemon: %v\n%s", err, out)
	}
	return bin
}

// The client against the real daemon: initialize, a streaming run that
// prints and awaits a binding answered by OnRequest, shutdown, exit; the
// daemon's exit ends the read loop with io.EOF.
func TestAgainstDaemon(t *testing.T) {
	bin := daemonBin(t)
	leakcheck.Check(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CODERUN_LOG_LEVEL=warn", "CODERUN_WARM_POOL=0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	c := New(stdin, stdout, Options{
		OnRequest: func(m *Message, reply Reply) {
			var p struct{ Function string }
			json.Unmarshal(m.Params, &p)
			reply.Result(json.RawMessage(`"` + p.Function + ` answered"`))
		},
		OnNotification: func(m *Message) {
			mu.Lock()
			logs = append(logs, m.Method+" "+string(m.Params))
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(method, params string) *Message {
		t.Helper()
		m, err := c.Call(ctx, method, json.RawMessage(params))
		if err != nil || m.Error != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s: %v, %v", method, m, err)
		}
		return m
	}
	call("initialize", `{"clientInfo":{"name":"lspclient test"}}`)
	run := call("run", `{"program":"print('hi', flush=True)\nreturn await t.f(1)","stream":true,`+
		`"bindings":[{"global":"t","functions":["f"]}]}`)
	var r struct {
		Value json.RawMessage
		Logs  []string
	}
	json.Unmarshal(run.Result, &r)
	if string(r.Value) != `"f answered"` || strings.Join(r.Logs, "|") != "hi" {
		t.Errorf("run result %s", run.Raw)
	}
	mu.Lock()
	if len(logs) != 1 || !strings.HasPrefix(logs[0], `run/log {`) || !strings.Contains(logs[0], `"text":"hi"`) {
		t.Errorf("notifications %q, want one run/log of hi", logs)
	}
	mu.Unlock()
	call("shutdown", "")
	c.Notify("exit", nil)
	<-c.Done()
	if err := c.Err(); !errors.Is(err, io.EOF) {
		t.Errorf("read loop ended with %v, want io.EOF", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("daemon: %v", err)
	}
}
