package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemon is a running coderun-rpc driven through its real stdio JSON-RPC.
type daemon struct {
	cmd  *exec.Cmd
	conn *peer
	// sessions is the daemon's session cap (capabilities.sessions.max); 0
	// for a build without sessions, whose session groups give no rows.
	sessions int
	// forks: the daemon can fork sessions (capabilities.sessions.fork).
	forks bool
	// isolation is the containment tier (capabilities.isolation).
	isolation string
	// preload lists the modules its fork server imports before it serves
	// (capabilities.python.preload; none for a build without the preload).
	preload []string
}

// startDaemon starts o.daemon with env added to this process's environment.
// Its tier is process unless CODERUN_ISOLATION is set there or in env: the
// groups measure the daemon's own path against their floors in one tier, and
// the tiers group sets both tiers itself.
func startDaemon(o options, env ...string) (*daemon, error) {
	cmd := exec.Command(o.daemon)
	cmd.Env = append(os.Environ(), "CODERUN_PYTHON_BIN="+o.python, "CODERUN_LOG_LEVEL=warn")
	if _, set := os.LookupEnv("CODERUN_ISOLATION"); !set {
		cmd.Env = append(cmd.Env, "CODERUN_ISOLATION=process")
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	conn, err := startPeer(cmd, true)
	if err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, conn: conn}
	m, err := call(conn, "initialize", map[string]any{"clientInfo": map[string]string{"name": "bench"}})
	if err != nil {
		d.stop()
		return nil, err
	}
	var init struct {
		Capabilities struct {
			Isolation string `json:"isolation"`
			Python    struct {
				Preload []string `json:"preload"`
			} `json:"python"`
			Sessions struct {
				Max  int  `json:"max"`
				Fork bool `json:"fork"`
			} `json:"sessions"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(m.Result, &init)
	d.sessions, d.forks = init.Capabilities.Sessions.Max, init.Capabilities.Sessions.Fork
	d.isolation, d.preload = init.Capabilities.Isolation, init.Capabilities.Python.Preload
	return d, nil
}

type runResult struct {
	Value json.RawMessage `json:"value"`
	Logs  []string        `json:"logs"`
	Error *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
}

// run executes program and fails unless it succeeds.
func (d *daemon) run(program string, extra map[string]any) (runResult, error) {
	raw, err := d.runRaw(program, extra)
	return decodeRun(raw, err)
}

// runRaw executes program and returns the response's result undecoded.
func (d *daemon) runRaw(program string, extra map[string]any) (json.RawMessage, error) {
	m, err := d.runTimed(program, extra)
	if err != nil {
		return nil, err
	}
	return m.Result, nil
}

// runTimed is runRaw, also returning when the response had arrived (At).
func (d *daemon) runTimed(program string, extra map[string]any) (*reply, error) {
	params, err := runParams(program, extra)
	if err != nil {
		return nil, err
	}
	return call(d.conn, "run", params)
}

// runParams encodes a run's params: program, a tools.echo binding, and the
// extra params (replacing those). Timed rows encode before the clock starts:
// encoding 50 nested declarations costs the client milliseconds.
func runParams(program string, extra map[string]any) (json.RawMessage, error) {
	params := map[string]any{"program": program,
		"bindings": []map[string]any{{"global": "tools", "functions": []string{"echo"}}}}
	for k, v := range extra {
		params[k] = v
	}
	return json.Marshal(params)
}

// decodeRun decodes a run's result and fails unless the run succeeded.
func decodeRun(raw json.RawMessage, err error) (runResult, error) {
	var r runResult
	if err == nil {
		err = json.Unmarshal(raw, &r)
	}
	if err == nil && r.Error != nil {
		err = fmt.Errorf("run failed: %s: %s", r.Error.Kind, r.Error.Message)
	}
	return r, err
}

// peakRSSKb reads the daemon's high-water RSS (VmHWM).
func (d *daemon) peakRSSKb() float64 { return procStatusKb(d.cmd.Process.Pid, "VmHWM") }

// procStatusKb reads one kB field of /proc/<pid>/status (0 when unreadable).
func procStatusKb(pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return n
		}
	}
	return 0
}

func (d *daemon) stop() {
	done := make(chan struct{})
	go func() {
		_, _ = call(d.conn, "shutdown", nil)
		_ = d.conn.conn.Notify(context.Background(), "exit", nil)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	exited := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-exited
	}
}

// measureDaemon runs the floors' rows and every measurement whose group name
// matches o.only: the groups of groupNames, in that order. warm, paced,
// bindings, logs and throughput share one daemon.
func measureDaemon(o options, f floors) ([]row, error) {
	rows := floorRows(f)
	more, err := measureGroups(o, f)
	return append(rows, more...), err
}

// floorRows are the floors as rows of their own.
func floorRows(f floors) []row {
	return []row{
		newRow("floor: python -I -S -c pass spawn", "ms", 0, ms(f.spawnBare), ""),
		newRow("floor: python -I -c 'import asyncio' spawn", "ms", 0, ms(f.spawnAsyncio), ""),
		newRow("floor: JSON-lines round trip Go↔Python", "µs", 0, us(f.lineRT), ""),
		newRow("floor: pre-started child runs return 1", "ms", 0, ms(f.prestarted), ""),
		newRow("floor: JSON-RPC round trip over stdio", "µs", 0, us(f.rpcRT), ""),
	}
}

// measureGroups runs the measurement groups that o.only matches, in order,
// against o.daemon.
func measureGroups(o options, f floors) ([]row, error) {
	var rows []row
	var shared *daemon
	defer func() {
		if shared != nil {
			shared.stop()
		}
	}()
	// on runs fn against the shared daemon, started on first use.
	on := func(fn func(d *daemon) ([]row, error)) func() ([]row, error) {
		return func() ([]row, error) {
			if shared == nil {
				d, err := startDaemon(o, "CODERUN_MAX_LOG_BYTES=16777216")
				if err != nil {
					return nil, err
				}
				shared = d
			}
			return fn(shared)
		}
	}
	one := func(fn func(options, *daemon) (row, error)) func(d *daemon) ([]row, error) {
		return func(d *daemon) ([]row, error) {
			r, err := fn(o, d)
			return []row{r}, err
		}
	}
	steps := []struct {
		group string
		run   func() ([]row, error)
	}{
		{"cold", func() ([]row, error) {
			return measureReturn1(o, "cold (pool 0)", ms(f.spawnAsyncio), "CODERUN_WARM_POOL=0")
		}},
		{"cold-spawn", func() ([]row, error) {
			return measureReturn1(o, "cold (pool 0), spawn mode", ms(f.spawnAsyncio),
				"CODERUN_WARM_POOL=0", "CODERUN_START_MODE=spawn")
		}},
		{"warm", on(func(d *daemon) ([]row, error) {
			return return1Rows(o, d, "warm (default pool)", ms(f.prestarted))
		})},
		{"paced", on(func(d *daemon) ([]row, error) { return pacedRows(o, d, "warm, paced", ms(f.prestarted)) })},
		{"paced-tmpfs", func() ([]row, error) { return tmpfsPacedRows(o, ms(f.prestarted)) }},
		{"bindings", on(func(d *daemon) ([]row, error) { return bindingRows(o, d) })},
		{"logs", on(one(logRow))},
		{"throughput", on(func(d *daemon) ([]row, error) {
			r, err := throughputRow(o, d)
			return []row{r, newRow("daemon peak RSS (VmHWM)", "MB", 0, d.peakRSSKb()/1024, "")}, err
		})},
		{"throughput-spawn", func() ([]row, error) {
			r, err := spawnThroughputRow(o)
			return []row{r}, err
		}},
		{"typed-bindings", on(func(d *daemon) ([]row, error) { return typedBindingRows(o, d) })},
		{"describe", on(one(describeRow))},
		{"typed-declare", on(one(typedDeclareRow))},
		{"outputs", on(func(d *daemon) ([]row, error) { return outputsRows(o, d) })},
		{"mcp-calls", func() ([]row, error) { return mcpCallRows(o) }},
		{"mcp-list", func() ([]row, error) { r, err := mcpListRow(o); return []row{r}, err }},
		{"session", on(withSessions(func(d *daemon) ([]row, error) { return sessionReturn1Rows(o, d, ms(f.prestarted)) }))},
		{"session-state", on(withSessions(func(d *daemon) ([]row, error) { return sessionStateRows(o, d) }))},
		{"session-fork", on(withSessions(func(d *daemon) ([]row, error) { return sessionForkRows(o, d) }))},
		{"session-idle", func() ([]row, error) { return sessionIdleRows(o) }},
		{"tiers", func() ([]row, error) { return tierRows(o) }},
		{"serve-unix", func() ([]row, error) { return serveUnixRows(o) }},
		{"serve-fanout", func() ([]row, error) { return serveFanoutRows(o) }},
		{"serve-idle", func() ([]row, error) { return serveIdleRows(o) }},
		{"serve-load", func() ([]row, error) { return serveLoadRows(o) }},
		{"packages", func() ([]row, error) { return packageRows(o) }},
		{"egress", func() ([]row, error) { return egressRows(o) }},
		{"workloads", func() ([]row, error) { return workloadsRows(o) }},
		{"adapters", func() ([]row, error) { return adapterRows(o) }},
		{"preload", func() ([]row, error) { return preloadRows(o) }},
		{"go-client", on(func(d *daemon) ([]row, error) { return goClientRows(o, d) })},
	}
	for i, st := range steps {
		if st.group != groupNames[i] {
			panic("bench: groupNames out of step with measureGroups")
		}
		if !o.only.MatchString(st.group) {
			continue
		}
		more, err := st.run()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.group, err)
		}
		rows = append(rows, more...)
	}
	return rows, nil
}

// spawnThroughputRow is the throughput row with a fresh interpreter per run
// (CODERUN_START_MODE=spawn), the start mode the fork server replaces.
func spawnThroughputRow(o options) (row, error) {
	d, err := startDaemon(o, "CODERUN_START_MODE=spawn")
	if err != nil {
		return row{}, err
	}
	defer d.stop()
	r, err := throughputRow(o, d)
	r.Metric += ", spawn mode"
	return r, err
}

func measureReturn1(o options, label string, floor float64, env ...string) ([]row, error) {
	d, err := startDaemon(o, env...)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	return return1Rows(o, d, label, floor)
}

func return1Rows(o options, d *daemon, label string, floor float64) ([]row, error) {
	_, _ = d.run("return 1", nil)
	s, err := timeN(o.samples, func() error { _, err := d.run("return 1", nil); return err })
	if err != nil {
		return nil, err
	}
	return []row{
		newRow("return 1, "+label+", p50", "ms", floor, ms(s.pct(50)), ""),
		newRow("return 1, "+label+", p90", "ms", floor, ms(s.pct(90)), ""),
		newRow("return 1, "+label+", p99", "ms", floor, ms(s.pct(99)), ""),
	}, nil
}

// pacedRows times return 1 with a pause before each run, so the warm pool has
// finished booting its children: the per-run path without pool starvation
// (the back-to-back rows above take children still importing).
func pacedRows(o options, d *daemon, label string, floor float64) ([]row, error) {
	n := 40
	if o.quick {
		n = 3
	}
	s := make(samples, 0, n)
	for range n {
		took, err := pacedRun(d, "return 1", nil)
		if err != nil {
			return nil, err
		}
		s = append(s, took)
	}
	note := fmt.Sprintf("%v pause before each run (pool ready)", refillPause)
	return []row{
		newRow("return 1, "+label+", p50", "ms", floor, ms(s.pct(50)), note),
		newRow("return 1, "+label+", p90", "ms", floor, ms(s.pct(90)), note),
	}, nil
}

// tmpfsPacedRows are the paced rows of a daemon whose TMPDIR is on tmpfs
// (/dev/shm): the run directory's creation and removal without the disk.
// On ext4 mounted with online discard, removing a directory waits for a
// discard of its block (0.3–5 ms measured on the reference machine). No
// rows where /dev/shm is not a tmpfs.
func tmpfsPacedRows(o options, floor float64) ([]row, error) {
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &st) != nil || st.Type != tmpfsMagic {
		return nil, nil
	}
	dir, err := os.MkdirTemp("/dev/shm", "coderun-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := startDaemon(o, "TMPDIR="+dir)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	return pacedRows(o, d, "warm, paced, TMPDIR on tmpfs", floor)
}

// refillPause is long enough for the warm pool to have a ready child again,
// in either start mode.
const refillPause = 300 * time.Millisecond

// pacedRun times one run of program (with the extra params) after a pause
// that lets the pool refill: from before the request is written to when the
// response's frame was read (reply.At), so the harness's
// own decoding of a large response (encoding/json scans a 1.4 MB result in
// 10 ms and more) is not counted as the daemon's.
func pacedRun(d *daemon, program string, extra map[string]any) (time.Duration, error) {
	params, err := runParams(program, extra)
	if err != nil {
		return 0, err
	}
	time.Sleep(refillPause)
	start := time.Now()
	m, err := call(d.conn, "run", params)
	if err != nil {
		return 0, err
	}
	_, err = decodeRun(m.Result, nil)
	return m.At.Sub(start), err
}

// bindingRows times sequential and gathered binding calls. The two-hop floor
// of the sequential row is measured again next to each timed run (the machine
// is shared: a floor from another minute is another machine).
func bindingRows(o options, d *daemon) ([]row, error) {
	n, rounds := 1000, 5
	if o.quick {
		n, rounds = 20, 1
	}
	seq := fmt.Sprintf("for i in range(%d):\n    await tools.echo(i)\nreturn 1", n)
	gathered := fmt.Sprintf("import asyncio\nawait asyncio.gather(*(tools.echo(i) for i in range(%d)))\nreturn 1", n)
	var floor, per, gath samples
	for range rounds {
		line, err := pythonRoundTrip(o, echoScript, `{"ping":1}`)
		if err != nil {
			return nil, err
		}
		rpc, err := rpcRoundTrip(o)
		if err != nil {
			return nil, err
		}
		// A pause before each run lets the pool finish a child (spawn mode), so
		// the difference is the calls, not a child still booting.
		b, err := pacedRun(d, "return 1", nil)
		if err != nil {
			return nil, err
		}
		s, err := pacedRun(d, seq, nil)
		if err != nil {
			return nil, err
		}
		g, err := pacedRun(d, gathered, nil)
		if err != nil {
			return nil, err
		}
		floor = append(floor, line+rpc)
		per = append(per, (s-b)/time.Duration(n))
		gath = append(gath, g-b)
	}
	return []row{
		newRow(fmt.Sprintf("sequential binding round trip (%d calls)", n), "µs", us(floor.pct(50)), us(per.pct(50)),
			fmt.Sprintf("floor = JSON-lines RT + JSON-RPC RT, re-measured next to each of %d runs", rounds)),
		newRow(fmt.Sprintf("%d gathered binding calls (run minus return 1)", n), "ms", 0, ms(gath.pct(50)), ""),
	}, nil
}

func logRow(o options, d *daemon) (row, error) {
	lines := 10240 // 10 MiB of 1 KiB lines
	if o.quick {
		lines = 100
	}
	prog := fmt.Sprintf("line = 'x' * 1023\nfor _ in range(%d):\n    print(line)\nreturn 1", lines)
	extra := map[string]any{"limits": map[string]any{"maxWallMs": 120000}}
	// Timed to the arrival of the response's last byte, before the client decodes it
	// (~10.5 MB of JSON), paired with a return 1 in each round; the decoded response
	// is checked afterwards.
	var s samples
	var raw json.RawMessage
	for range 3 {
		b, err := arrival(d, "return 1", nil)
		if err != nil {
			return row{}, err
		}
		start := time.Now()
		r, err := d.runTimed(prog, extra)
		if err != nil {
			return row{}, err
		}
		s, raw = append(s, r.At.Sub(start)-b), r.Result
	}
	if r, err := decodeRun(raw, nil); err != nil || len(r.Logs) != lines {
		return row{}, fmt.Errorf("log capture kept %d of %d lines (%v)", len(r.Logs), lines, err)
	}
	return newRow(fmt.Sprintf("capture %d KiB of printed lines (run minus return 1)", lines), "ms", 0,
		ms(s.pct(50)), "to the response's last byte, before the client decodes it"), nil
}

// arrival times one run of program to its response's last byte.
func arrival(d *daemon, program string, extra map[string]any) (time.Duration, error) {
	start := time.Now()
	r, err := d.runTimed(program, extra)
	if err != nil {
		return 0, err
	}
	_, err = decodeRun(r.Result, nil)
	return r.At.Sub(start), err
}

func throughputRow(o options, d *daemon) (row, error) {
	window := 10 * time.Second
	if o.quick {
		window = time.Second
	}
	perSec, err := throughput([]*daemon{d}, 4, window)
	if err != nil {
		return row{}, err
	}
	return newRow("return 1 throughput, 4 concurrent callers", "runs/s", 0, perSec, ""), nil
}
