package main

import (
	"bufio"
	"os"
	"os/exec"
	"time"
)

// floors are the costs no daemon can avoid, measured in the same run.
type floors struct {
	spawnBare    time.Duration // python -I -S -c pass
	spawnAsyncio time.Duration // python -I -c "import asyncio"
	lineRT       time.Duration // one JSON-lines round trip Go↔Python over pipes
	prestarted   time.Duration // a pre-started child compiles and runs `return 1`
	rpcRT        time.Duration // one JSON-RPC round trip Go↔Go over stdio
}

func measureFloors(o options) (floors, error) {
	var f floors
	var err error
	spawn := func(args ...string) func() error {
		return func() error { return exec.Command(o.python, args...).Run() }
	}
	s, err := timeN(o.samples/4+1, spawn("-I", "-S", "-c", "pass"))
	if err != nil {
		return f, err
	}
	f.spawnBare = s.pct(50)
	if s, err = timeN(o.samples/4+1, spawn("-I", "-c", "import asyncio")); err != nil {
		return f, err
	}
	f.spawnAsyncio = s.pct(50)
	if f.lineRT, err = pythonRoundTrip(o, echoScript, `{"ping":1}`); err != nil {
		return f, err
	}
	if f.prestarted, err = pythonRoundTrip(o, runScript, `{"program":"return 1"}`); err != nil {
		return f, err
	}
	f.rpcRT, err = rpcRoundTrip(o)
	return f, err
}

const echoScript = `
import sys
r, w = sys.stdin.buffer, sys.stdout.buffer
for line in r:
    w.write(line); w.flush()
`

// runScript is the least a pre-started child must do per run: decode the
// program, compile it as an async body, run it, encode the value.
const runScript = `
import sys, json, asyncio
r, w = sys.stdin.buffer, sys.stdout.buffer
for line in r:
    src = json.loads(line)["program"]
    body = "async def __main__():\n" + "".join("    " + l + "\n" for l in src.splitlines())
    g = {}
    exec(compile(body, "<program>", "exec"), g)
    v = asyncio.run(g["__main__"]())
    w.write(json.dumps({"value": v}).encode() + b"\n"); w.flush()
`

// pythonRoundTrip starts one interpreter running script and times request
// lines answered by one line each.
func pythonRoundTrip(o options, script, request string) (time.Duration, error) {
	cmd := exec.Command(o.python, "-I", "-u", "-c", script)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { in.Close(); _ = cmd.Wait() }()
	r := bufio.NewReader(out)
	line := []byte(request + "\n")
	rt := func() error {
		if _, err := in.Write(line); err != nil {
			return err
		}
		_, err := r.ReadBytes('\n')
		return err
	}
	_, _ = timeN(10, rt) // warm up
	s, err := timeN(o.samples*5, rt)
	return s.pct(50), err
}

// rpcRoundTrip times JSON-RPC requests to an echo server that is this same
// binary, so it measures framing and pipes, not a peer's work.
func rpcRoundTrip(o options) (time.Duration, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, "-echo-server")
	conn, err := startPeer(cmd, false)
	if err != nil {
		return 0, err
	}
	defer func() { cmd.Process.Kill(); _ = cmd.Wait() }()
	rt := func() error {
		_, err := call(conn, "echo", map[string]int{"n": 1})
		return err
	}
	_, _ = timeN(10, rt)
	s, err := timeN(o.samples*5, rt)
	return s.pct(50), err
}

// echoServer answers every request with its params (the -echo-server mode),
// on the read goroutine, one write per response.
func echoServer() {
	p := newPeer(stdio{os.Stdin, os.Stdout}, false)
	<-p.conn.DisconnectNotify()
}
