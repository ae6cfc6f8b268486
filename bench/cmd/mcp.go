package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	var daemonCPU, clientCPU time.Duration // summed over the rounds
	pid := d.cmd.Process.Pid
	for range rounds {
		c0 := processCPU(pid)
		b, err := pacedRun(d, "return 1", binding)
		if err != nil {
			return nil, err
		}
		c1 := processCPU(pid)
		t, err := pacedRun(d, seq, binding)
		if err != nil {
			return nil, err
		}
		daemonCPU += processCPU(pid) - c1 - (c1 - c0)
		start, self := time.Now(), processCPU(os.Getpid())
		for range n {
			if _, err := direct.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}}); err != nil {
				return nil, err
			}
		}
		floor = append(floor, time.Since(start))
		clientCPU += processCPU(os.Getpid()) - self
		viaDaemon = append(viaDaemon, t-b)
	}
	calls := time.Duration(rounds * n)
	return []row{newRow(fmt.Sprintf("%d sequential upstream MCP calls from a program", n), "ms",
		ms(floor.pct(50)), ms(viaDaemon.pct(50)), "floor = the same calls from a Go SDK client; minus return 1; target ratio ≤ 1.3"),
		newRow("daemon CPU per upstream MCP call", "µs", us(clientCPU/calls), us(daemonCPU/calls),
			"floor = the Go SDK client's CPU per direct call; the daemon's process alone, minus return 1's")}, nil
}

// processCPU is the user + system CPU time pid has used so far, from
// /proc/<pid>/stat (clock ticks of 10 ms: sum it over many calls); 0 when
// unreadable.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // state is f[0]: utime and stime are fields 14 and 15
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
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
