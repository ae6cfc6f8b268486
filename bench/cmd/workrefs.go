package main

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The references of the workloads group: a `python -c` subprocess per
// program and a warm Jupyter kernel, both in one working directory of the
// harness (in.csv written there before each run that reads it), both
// answering W3's binding calls through echoSocket.

// toolsPrelude defines `tools.echo` for a reference host: a JSON line
// {"id", "args"} per call on the harness's echo socket, calls pipelined and
// matched by id, so gathered calls overlap as they do through the daemon.
// The connection belongs to the event loop that opened it (one per
// `python -c`; the kernel's, kept from cell to cell).
const toolsPrelude = `import asyncio as _asyncio, json as _json

class _Tools:
    def __init__(self, path):
        self._path, self._loop, self._next, self._pending = path, None, 0, {}

    async def _connect(self):
        self._reader, self._writer = await _asyncio.open_unix_connection(self._path, limit=1 << 24)
        self._pump = _asyncio.ensure_future(self._answers())

    async def _answers(self):
        async for line in self._reader:
            answer = _json.loads(line)
            self._pending.pop(answer["id"]).set_result(answer["result"])

    async def echo(self, arg):
        loop = _asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._pending = loop, {}
            self._connected = loop.create_task(self._connect())
        await self._connected
        self._next += 1
        answer = self._pending[self._next] = loop.create_future()
        self._writer.write((_json.dumps({"id": self._next, "args": arg}) + "\n").encode())
        return await answer

tools = _Tools(%q)
`

// displayPrelude is what a naive host gives a program for display(): a
// figure's PNG, printed as a JSON line {"display": {"image/png": base64}}.
const displayPrelude = `def display(*objs):
    import base64, io
    for obj in objs:
        buf = io.BytesIO()
        obj.savefig(buf, format="png")
        print(json.dumps({"display": {"image/png": base64.b64encode(buf.getvalue()).decode()}}))
`

// referenceSource is program as a reference host runs it: its body in a
// function (a coroutine when it awaits), called, the value printed as the
// last line, {"value": …}. Under `python -c` (jupyter false) it also defines
// tools (on socket) and display when the program uses them; a kernel has
// tools from its set-up and display from IPython, and awaits at the top
// level on its own loop.
func referenceSource(program, socket string, jupyter bool) string {
	var b strings.Builder
	b.WriteString("import json\n")
	if !jupyter && strings.Contains(program, "tools.") {
		fmt.Fprintf(&b, toolsPrelude, socket)
	}
	if !jupyter && strings.Contains(program, "display(") {
		b.WriteString(displayPrelude)
	}
	async := strings.Contains(program, "await ")
	if async {
		b.WriteString("async ")
	}
	b.WriteString("def _bench_main():\n")
	for _, line := range strings.Split(program, "\n") {
		b.WriteString("    " + line + "\n")
	}
	call := "_bench_main()"
	switch {
	case async && jupyter:
		call = "await " + call
	case async:
		b.WriteString("import asyncio\n")
		call = "asyncio.run(" + call + ")"
	}
	b.WriteString(`print(json.dumps({"value": ` + call + `}))` + "\n")
	return b.String()
}

// referenceOutcome reads a reference's printed lines: each display, then
// the value on the last line.
func referenceOutcome(stdout string) (outcome, error) {
	var o outcome
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	for i, line := range lines {
		var m struct {
			Value   json.RawMessage            `json:"value"`
			Display map[string]json.RawMessage `json:"display"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return o, fmt.Errorf("printed %.200q: %w", line, err)
		}
		if m.Display != nil {
			o.displays = append(o.displays, mimeTypes(m.Display))
		}
		if i == len(lines)-1 {
			o.value = compactJSON(m.Value)
		}
	}
	return o, nil
}

func mimeTypes(data map[string]json.RawMessage) []string {
	var types []string
	for k := range data {
		types = append(types, k)
	}
	return types
}

// pythonCHost runs each program in a `python -c` subprocess of its own.
type pythonCHost struct {
	python, dir, socket, csv string
}

func (h *pythonCHost) label() string         { return "python -c per program (reference)" }
func (h *pythonCHost) warm(w workload) error { return nil }

func (h *pythonCHost) once(w workload) (outcome, time.Duration, error) {
	src := referenceSource(w.program, h.socket, false)
	start := time.Now()
	if err := writeCSV(h.dir, h.csv, w); err != nil {
		return outcome{}, 0, err
	}
	cmd := exec.Command(h.python, "-c", src)
	cmd.Dir = h.dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		return outcome{}, 0, fmt.Errorf("%w: %s", err, lastLine([]byte(stderr.String())))
	}
	o, err := referenceOutcome(string(out))
	return o, took, err
}

// writeCSV writes w's input into dir, when it has one: the host's part of
// giving a program a file, timed with the run.
func writeCSV(dir, csv string, w workload) error {
	if !w.csv {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "in.csv"), []byte(csv), 0o644)
}

//go:embed jupyter_driver.py
var jupyterDriver string

// jupyterHost executes each program as a cell of one IPython kernel,
// through jupyter_driver.py and jupyter_client.
type jupyterHost struct {
	cmd              *exec.Cmd
	in               *json.Encoder
	stdin            interface{ Close() error }
	out              *bufio.Reader
	dir, socket, csv string
}

// startJupyter starts the driver and its kernel in dir (its runtime and
// IPython directories under dir too) and defines tools there. It fails with
// the reason when the interpreter lacks ipykernel or jupyter_client.
func startJupyter(python, dir, socket, csv string) (*jupyterHost, error) {
	if missing := lacks(python, "ipykernel", "jupyter_client"); missing != "" {
		return nil, fmt.Errorf("%s lacks %s (make bench installs bench/requirements.txt)", python, missing)
	}
	h := &jupyterHost{dir: dir, socket: socket, csv: csv}
	h.cmd = exec.Command(python, "-c", jupyterDriver, dir)
	h.cmd.Env = append(os.Environ(), "JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"),
		"IPYTHONDIR="+filepath.Join(dir, "ipython"), "JUPYTER_PLATFORM_DIRS=1")
	h.cmd.Stderr = os.Stderr
	stdin, err := h.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := h.cmd.Start(); err != nil {
		return nil, err
	}
	h.stdin, h.in, h.out = stdin, json.NewEncoder(stdin), bufio.NewReader(stdout)
	if _, err := h.out.ReadBytes('\n'); err != nil {
		h.stop()
		return nil, fmt.Errorf("the Jupyter driver did not start: %w", err)
	}
	if _, _, err := h.cell(fmt.Sprintf(toolsPrelude, socket)); err != nil {
		h.stop()
		return nil, err
	}
	return h, nil
}

func (h *jupyterHost) label() string { return "warm Jupyter kernel (reference)" }

// warm executes w once untimed: the kernel then holds its imports.
func (h *jupyterHost) warm(w workload) error {
	_, _, err := h.once(w)
	return err
}

func (h *jupyterHost) once(w workload) (outcome, time.Duration, error) {
	src := referenceSource(w.program, h.socket, true)
	start := time.Now()
	if err := writeCSV(h.dir, h.csv, w); err != nil {
		return outcome{}, 0, err
	}
	stdout, displays, err := h.cell(src)
	took := time.Since(start)
	if err != nil {
		return outcome{}, 0, err
	}
	o, err := referenceOutcome(stdout)
	o.displays = append(o.displays, displays...)
	return o, took, err
}

// cell runs code and returns its printed text and its displays' MIME types.
func (h *jupyterHost) cell(code string) (string, [][]string, error) {
	if err := h.in.Encode(map[string]string{"code": code}); err != nil {
		return "", nil, err
	}
	line, err := h.out.ReadBytes('\n')
	if err != nil {
		return "", nil, fmt.Errorf("the Jupyter driver: %w", err)
	}
	var r struct {
		Stdout   string     `json:"stdout"`
		Displays [][]string `json:"displays"`
		Error    *string    `json:"error"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return "", nil, err
	}
	if r.Error != nil {
		return "", nil, fmt.Errorf("the kernel raised %s", *r.Error)
	}
	return r.Stdout, r.Displays, nil
}

// stop ends the driver by closing its stdin (it shuts the kernel down),
// killing it if it has not exited within 30 s.
func (h *jupyterHost) stop() {
	_ = h.stdin.Close()
	exited := make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = h.cmd.Process.Kill()
		<-exited
	}
}

// echoSocket answers the references' binding calls on a Unix socket: each
// line {"id", "args"} with {"id", "result": args}, as the harness's client
// answers the daemon's binding/call (startDaemon's echo).
type echoSocket struct {
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startEchoSocket(path string) (*echoSocket, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	e := &echoSocket{ln: ln, conns: map[net.Conn]bool{}}
	e.wg.Add(1)
	go e.accept()
	return e, nil
}

func (e *echoSocket) accept() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		e.conns[c] = true
		e.mu.Unlock()
		e.wg.Add(1)
		go e.serve(c)
	}
}

// serve answers one connection's calls in order; answers are flushed when
// no further call is already buffered, so a gathered burst is answered in
// few writes.
func (e *echoSocket) serve(c net.Conn) {
	defer e.wg.Done()
	defer func() {
		e.mu.Lock()
		delete(e.conns, c)
		e.mu.Unlock()
		_ = c.Close()
	}()
	r, w := bufio.NewReaderSize(c, 1<<16), bufio.NewWriter(c)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var call struct {
			ID   json.RawMessage `json:"id"`
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal(line, &call); err != nil {
			fmt.Fprintln(os.Stderr, "bench: echo socket:", err)
			return
		}
		answer, _ := json.Marshal(map[string]json.RawMessage{"id": call.ID, "result": call.Args})
		_, _ = w.Write(append(answer, '\n'))
		if r.Buffered() == 0 && w.Flush() != nil {
			return
		}
	}
}

// stop closes the listener and every connection, and waits for their
// goroutines.
func (e *echoSocket) stop() {
	_ = e.ln.Close()
	e.mu.Lock()
	for c := range e.conns {
		_ = c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}
