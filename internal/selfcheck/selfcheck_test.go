package selfcheck

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// daemon serves with the real built daemon as a child process whose stdio
// are the pipes ($CODERUN_RPC_BIN, which make exports, else a fresh build).
func daemon(t *testing.T, env ...string) Serve {
	bin := os.Getenv("CODERUN_RPC_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "coderun-rpc")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/coderun-rpc/coderun-rpc/cmd/coderun-rpc").CombinedOutput(); err != nil {
			t.Fatalf("building the daemon: %v\n%s", err, out)
		}
	}
	return func(ctx context.Context, in io.Reader, out io.Writer) int {
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(os.Environ(), append([]string{"CODERUN_LOG_LEVEL=warn"}, env...)...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, os.Stderr
		if err := cmd.Run(); cmd.ProcessState == nil {
			t.Errorf("starting the daemon: %v", err)
			return -1
		}
		return cmd.ProcessState.ExitCode()
	}
}

// The report's format is what `coderun-rpc --check` prints; the run's time
// is a Go duration (over a second on a loaded machine).
var wantReport = regexp.MustCompile(`^initialize: ok
binding/call: answered \{"n":41\}
run: value \{"n":42,"sitePackages":"[^"]+","unreadable":null\}, logs \["hello from the smoke run"\], [\d.]+(ms|s)
run stats: \{"wallMs":\d+,.*\}
site-packages: ok \(imported /\S+\)
shutdown: ok
$`)

func TestSmokeConversation(t *testing.T) {
	serve := daemon(t)
	leakcheck.Check(t)
	report, err := Run(context.Background(), serve)
	if err != nil {
		t.Errorf("Run: %v", err)
	}
	if !wantReport.MatchString(report) {
		t.Errorf("report:\n%s", report)
	}
}

// A server that refuses the run: the failure names the step and the error
// response, the report stops before it, and the server still exits cleanly.
func TestRunRefused(t *testing.T) {
	serve := daemon(t, "CODERUN_MAX_WALL_MS=1000")
	leakcheck.Check(t)
	report, err := Run(context.Background(), serve)
	if err == nil || !strings.HasPrefix(err.Error(), `run: error response {"code":-32602,`) {
		t.Errorf("Run: %v, want the run's error response", err)
	}
	if report != "initialize: ok\n" {
		t.Errorf("report:\n%s", report)
	}
}

// A server that ends at once with code 3: initialize fails on the closed
// connection, and the exit code does not hide that first failure.
func TestServerGone(t *testing.T) {
	leakcheck.Check(t)
	report, err := Run(context.Background(), func(context.Context, io.Reader, io.Writer) int { return 3 })
	if err == nil || !strings.HasPrefix(err.Error(), "initialize: ") || report != "" {
		t.Errorf("Run: %q, %v", report, err)
	}
}

// A server whose run is clean but whose exit code is not 0.
func TestExitCode(t *testing.T) {
	serve := daemon(t)
	leakcheck.Check(t)
	_, err := Run(context.Background(), func(ctx context.Context, in io.Reader, out io.Writer) int {
		serve(ctx, in, out)
		return 1
	})
	if err == nil || err.Error() != "server exited with code 1" {
		t.Errorf("Run: %v", err)
	}
}
