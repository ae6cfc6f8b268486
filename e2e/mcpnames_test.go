package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/internal/mcptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a model reads in `coderun-rpc mcp` names only what a program can
// reach: no server global is hidden by a module or a builtin of the same
// name, and run_python's description shows calls that exist (docs/mcp.md
// §1.2, §2.1).

// runPythonDescription is run_python's description as the client lists it.
func runPythonDescription(t *testing.T, cs *sdk.ClientSession) string {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "run_python" {
			return tool.Description
		}
	}
	t.Fatal("no run_python tool")
	return ""
}

// C960: a server key whose global a program's `import time` would hide, or
// that would hide a builtin or the McpToolError class every tool raises,
// stops `coderun-rpc mcp` at start, exit 2, naming the server, the name and
// what hides what; the JSON-RPC daemon, where the client picks each
// binding's global, starts with the same file.
func TestMCPServeRefusesHiddenGlobals(t *testing.T) {
	leakcheck.Check(t)
	for key, want := range map[string][]string{
		"time":         {`mcp server "time"`, `global "time"`, `standard-library module`, `"import time"`, `rename`},
		"map":          {`mcp server "map"`, `global "map"`, `builtin`, `rename`},
		"McpToolError": {`mcp server "McpToolError"`, `global "McpToolError"`, `error class`, `rename`},
	} {
		cfg := mcpConfig(t, map[string]map[string]string{key: mcptest.Env(0, "")})
		cmd := exec.Command(daemonBin, "mcp", "--mcp-config", cfg)
		cmd.Env = environ(t, nil)
		out, _ := cmd.CombinedOutput() // stdin is empty: a daemon that started exits 0 at once
		if code := cmd.ProcessState.ExitCode(); code != 2 {
			t.Errorf("%s: exit %d, want 2; output:\n%s", key, code, out)
			continue
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: the refusal lacks %q:\n%s", key, w, out)
			}
		}
		rpc := exec.Command(daemonBin)
		rpc.Env = environ(t, map[string]string{"CODERUN_MCP_CONFIG": cfg})
		if out, err := rpc.CombinedOutput(); err != nil {
			t.Errorf("%s: the JSON-RPC daemon refused the file: %v\n%s", key, err, out)
		}
	}
}

// exampleProgram is the program a description shows after "For example:",
// its lines indented by four spaces.
func exampleProgram(desc string) string {
	_, after, ok := strings.Cut(desc, "For example:\n")
	if !ok {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(after, "\n") {
		if !strings.HasPrefix(l, "    ") {
			break
		}
		lines = append(lines, strings.TrimPrefix(l, "    "))
	}
	return strings.Join(lines, "\n")
}

// C961: without any upstream, run_python's description says there are no
// host tools, shows no stub and no call to a server, and its example
// program runs.
func TestMCPServeDescriptionWithoutUpstreams(t *testing.T) {
	t.Parallel()
	cs := mcpServeServers(t, nil, nil, nil)
	desc := runPythonDescription(t, cs)
	if !strings.Contains(desc, "No MCP server is configured: there are no host tools") {
		t.Errorf("the description does not say there are no host tools:\n%s", desc)
	}
	for _, absent := range []string{"everything", "McpToolError", "await", "# coderun-rpc: the functions"} {
		if strings.Contains(desc, absent) {
			t.Errorf("the description shows %q:\n%s", absent, desc)
		}
	}
	program := exampleProgram(desc)
	if program == "" {
		t.Fatalf("the description shows no example program:\n%s", desc)
	}
	if res := runPython(t, cs, map[string]any{"program": program}, nil); res.IsError || !strings.Contains(text(res), "value: ") {
		t.Errorf("the example program %q: isError %v, text %q", program, res.IsError, text(res))
	}
}

var exampleCall = regexp.MustCompile(`await ([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\(`)

// C962: with upstreams, the description's examples call tools the server
// has: a method the stubs below declare, and a dashed name by subscript.
func TestMCPServeDescriptionCallsARealTool(t *testing.T) {
	t.Parallel()
	desc := runPythonDescription(t, mcpServe(t, nil))
	m := exampleCall.FindStringSubmatch(desc)
	if m == nil {
		t.Fatalf("the description shows no example call:\n%s", desc)
	}
	if m[1] != "test_server" || !strings.Contains(desc, "\n    async def "+m[2]+"(") {
		t.Errorf("the example calls %s.%s, which the stubs do not declare:\n%s", m[1], m[2], desc)
	}
	if !strings.Contains(desc, `test_server["get-sum"](...)`) {
		t.Errorf("the description shows no subscript call of the dashed tool:\n%s", desc)
	}
	if strings.Contains(desc, "everything") {
		t.Errorf("the description names a server that is not configured:\n%s", desc)
	}
}

// C963: when no configured server can be reached, the description says so
// with the reason and shows no call and no empty stub.
func TestMCPServeDescriptionNoServerReached(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers":{"gone":{"command":"/nonexistent/mcp-server"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemonBin, "mcp", "--mcp-config", cfg)
	cmd.Env = environ(t, nil)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	desc := runPythonDescription(t, cs)
	for _, want := range []string{"No configured MCP server could be reached: there are no host tools", `# unavailable: mcp server "gone"`} {
		if !strings.Contains(desc, want) {
			t.Errorf("the description lacks %q:\n%s", want, desc)
		}
	}
	for _, absent := range []string{"everything", "await", "# coderun-rpc: the functions"} {
		if strings.Contains(desc, absent) {
			t.Errorf("the description shows %q:\n%s", absent, desc)
		}
	}
}
