package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/internal/wheeltest"
)

// describeCLI runs `coderun-rpc describe` with params on stdin and env
// added: its stdout, stderr and exit code.
func describeCLI(t *testing.T, env map[string]string, params string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(daemonBin, "describe")
	cmd.Env = environ(t, env)
	cmd.Stdin = strings.NewReader(params)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// methodStubs is a running daemon's bindings/describe answer for params.
func methodStubs(t *testing.T, d *daemon, params string) string {
	t.Helper()
	m := d.call("bindings/describe", params)
	var r struct {
		Stubs string `json:"stubs"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		t.Fatalf("describe: %s %+v; stderr:\n%s", m.Result, m.Error, d.stderr)
	}
	return r.Stubs
}

// C1295: `coderun-rpc describe` prints, byte for byte, what a daemon with
// the same configuration answers bindings/describe for the same params:
// budgets tightened by limits, the preload, the packages allow-list and the
// egress policy (the daemon's and a run's narrowing) in the header.
func TestDescribeCommandMatchesMethodC1295(t *testing.T) {
	leakcheck.Check(t)
	policy := filepath.Join(t.TempDir(), "egress.json")
	if err := os.WriteFile(policy, []byte(`{"allow": ["api.example.com", "docs.example.com"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	typed := `{"bindings":[{"global":"tools","functions":[` + searchFn + `,"legacy","my-tool"]}],"limits":{"maxWallMs":5000,"cpuSeconds":3}}`
	for name, c := range map[string]struct {
		env    map[string]string
		params []string
	}{
		"defaults": {nil, []string{typed, `{}`, `{"bindings":[{"global":"t","functions":["f"]}],"ignored":1}`}},
		"limits":   {map[string]string{"CODERUN_CPU_SECONDS": "7", "CODERUN_MAX_LOG_BYTES": "1000"}, []string{typed}},
		"warned":   {map[string]string{"CODERUN_MAX_WAL_MS": "5"}, []string{typed}},
		"preload":  {map[string]string{"CODERUN_PRELOAD": "json,?coderun_no_such_module"}, []string{typed}},
		"packages": {packagesEnv(t, wheeltest.UV(t)), []string{typed, `{"packages":["tinya"]}`}},
		"egress": {map[string]string{"CODERUN_EGRESS": policy},
			[]string{typed, `{"egress":["api.example.com"],"bindings":[{"global":"t","functions":["f"]}]}`}},
	} {
		t.Run(name, func(t *testing.T) {
			d := started(t, c.env)
			for _, params := range c.params {
				want := methodStubs(t, d, params)
				got, stderr, code := describeCLI(t, c.env, params)
				if code != 0 || got != want {
					t.Errorf("params %s: exit %d, stderr %q\nsubcommand:\n%s\nmethod:\n%s", params, code, stderr, got, want)
				}
				if _, misspelled := c.env["CODERUN_MAX_WAL_MS"]; misspelled && !strings.Contains(stderr, "CODERUN_MAX_WAL_MS") {
					t.Errorf("the daemon's warning of a misspelled variable is not on stderr: %q", stderr)
				}
			}
		})
	}
}

// C1296: params the method refuses with −32602 make the subcommand exit 2
// with the same message on stderr and nothing on stdout; an MCP-server
// binding is refused by name; a bad configuration is the daemon's start-up
// line and exit 2.
func TestDescribeCommandRefusalsC1296(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	for _, params := range []string{`{"bindings":3}`, `{"limits":{"cpuSeconds":-1}}`, `[1]`, `{"packages":["x"]}`,
		`{"egress":["a.test"]}`, `{"bindings":[{"global":"t","functions":["f","f"]}]}`} {
		m := d.call("bindings/describe", params)
		if m.Error == nil || m.Error.Code != -32602 {
			t.Fatalf("method on %s: %s %+v", params, m.Result, m.Error)
		}
		out, stderr, code := describeCLI(t, nil, params)
		if code != 2 || out != "" || stderr != "coderun-rpc describe: "+m.Error.Message+"\n" {
			t.Errorf("params %s: exit %d, stdout %q, stderr %q; the method: %q", params, code, out, stderr, m.Error.Message)
		}
	}
	out, stderr, code := describeCLI(t, nil, `{"bindings":[{"global":"gh","mcp":"github"}]}`)
	if code != 2 || out != "" || !strings.Contains(stderr, `bindings name an MCP server ("mcp")`) {
		t.Errorf("mcp binding: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if help, err := exec.Command(daemonBin, "--help").Output(); err != nil || !strings.Contains(string(help), "coderun-rpc describe") {
		t.Errorf("--help does not show describe: %v\n%s", err, help)
	}
	bad := map[string]string{"CODERUN_MAX_WALL_MS": "abc"}
	out, stderr, code = describeCLI(t, bad, `{}`)
	startup := exec.Command(daemonBin)
	startup.Env = environ(t, bad)
	line, _ := startup.CombinedOutput()
	if code != 2 || out != "" || stderr != string(line) || !strings.Contains(stderr, "CODERUN_MAX_WALL_MS") {
		t.Errorf("bad configuration: exit %d, stdout %q, stderr %q; the daemon said %q", code, out, stderr, line)
	}
}
