package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/mcptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP (docs/mcp.md): upstream calls from a program against the same calls
// made directly by a Go SDK client, and tools/list of `coderun-rpc mcp`.
// The upstream is this binary re-executed as internal/mcptest's server.

// mcpConfigFile writes an mcpServers file naming this binary as server "up"
// with extra tools, in a directory the caller removes.
func mcpConfigFile(extra int) (string, error) {
	dir, err := os.MkdirTemp("", "bench-mcp-")
	if err != nil {
		return "", err
	}
	doc := map[string]any{"mcpServers": map[string]any{"up": map[string]any{"command": os.Args[0], "env": mcptest.Env(extra, "")}}}
	b, _ := json.Marshal(doc)
	path := filepath.Join(dir, "mcp.json")
	return path, os.WriteFile(path, b, 0o600)
}

// directClient connects a Go SDK client to the upstream, as the daemon does.
func directClient(ctx context.Context) (*sdk.ClientSession, error) {
	cmd := exec.Command(os.Args[0])
	for k, v := range mcptest.Env(0, "") {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(os.Environ(), cmd.Env...)
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	return c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
}

// mcpCallRows times a program making n sequential upstream calls (minus a
// paired return 1) against n direct calls from a Go SDK client, alternating
// in the same run; the direct figure is the floor. Target ratio ≤ 1.3.
func mcpCallRows(o options) ([]row, error) {
	n, rounds := 100, 10
	if o.quick {
		n, rounds = 5, 1
	}
	path, err := mcpConfigFile(0)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Dir(path))
	d, err := startDaemon(o, "CODERUN_MCP_CONFIG="+path)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	ctx := context.Background()
	direct, err := directClient(ctx)
	if err != nil {
		return nil, err
	}
	defer direct.Close()
	binding := map[string]any{"bindings": []map[string]any{{"global": "up", "mcp": "up"}}}
	seq := fmt.Sprintf("for i in range(%d):\n    await up.echo(message='x')\nreturn 1", n)
	if _, err := d.run(seq, binding); err != nil { // starts the upstream, lists its tools
		return nil, err
	}
	var viaDaemon, floor samples
	for range rounds {
		b, err := pacedRun(d, "return 1", binding)
		if err != nil {
			return nil, err
		}
		t, err := pacedRun(d, seq, binding)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		for range n {
			if _, err := direct.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}}); err != nil {
				return nil, err
			}
		}
		floor = append(floor, time.Since(start))
		viaDaemon = append(viaDaemon, t-b)
	}
	return []row{newRow(fmt.Sprintf("%d sequential upstream MCP calls from a program", n), "ms",
		ms(floor.pct(50)), ms(viaDaemon.pct(50)), "floor = the same calls from a Go SDK client; minus return 1; target ratio ≤ 1.3")}, nil
}

// mcpListRow times tools/list on `coderun-rpc mcp` with 200 upstream tools,
// once the first listing has reached and cached the upstream. Target ≤ 20 ms.
func mcpListRow(o options) (row, error) {
	path, err := mcpConfigFile(200)
	if err != nil {
		return row{}, err
	}
	defer os.RemoveAll(filepath.Dir(path))
	cmd := exec.Command(o.daemon, "mcp", "--mcp-config", path)
	cmd.Env = append(os.Environ(), "CODERUN_PYTHON_BIN="+o.python, "CODERUN_LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return row{}, err
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return row{}, err
	}
	s, err := timeN(o.samples, func() error { _, err := cs.ListTools(ctx, nil); return err })
	if err != nil {
		return row{}, err
	}
	return newRow("coderun-rpc mcp tools/list, 200 upstream tools, p50", "ms", 0, ms(s.pct(50)),
		"cached; request to response; target ≤ 20 ms"), nil
}
