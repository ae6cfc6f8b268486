package e2e

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Client results are carved out as raw bytes (never encoding/json): lossy
// ones are refused, deep ones arrive intact, invalid UTF-8 inside a result
// is judged as lossy rather than as a broken message (docs/protocol.md §2, §4).
func TestBindingResultsRaw(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	bind := `"bindings":[{"global":"tools","functions":["f"]}]`
	try := "try:\n    return await tools.f()\nexcept RuntimeError as e:\n    return 'refused: ' + str(e)"
	for _, c := range []struct{ result, want string }{
		{`-0`, `"refused: binding resolution must be lossless JSON"`},
		{`1e400`, `"refused: binding resolution must be lossless JSON"`},
		{`9007199254740993`, `"refused: binding resolution must be lossless JSON"`},
		{"\"\xff\"", `"refused: binding resolution must be lossless JSON"`},
		{`"\ud800"`, `"\ud800"`},
		{`{"a":1,"a":2}`, `{"a":2}`}, // passed through unmerged; Python's dict keeps the last
		{`1.0`, `1`},
		{`"<&>\u2028"`, "\"<&>\u2028\""},
	} {
		d.behave("f", constant(c.result))
		r := d.run(prog(try, bind))
		if r.Error != nil || string(r.Value) != c.want {
			t.Errorf("result %q: value %s error %+v, want %s", c.result, r.Value, r.Error, c.want)
		}
	}
	// 12 000 levels of nesting in a client result.
	deep := strings.Repeat("[", 12000) + strings.Repeat("]", 12000)
	d.behave("f", constant(deep))
	r := d.run(prog("v = await tools.f()\nn = 0\nwhile v:\n    v = v[0]\n    n += 1\nreturn n", bind))
	expectOK(t, r, "11999")
	// An error answer whose message is not a string.
	d.behave("f", func(callParams) string { return `"error":{"code":1,"message":{"no":1}}` })
	expectOK(t, d.run(prog(try, bind)), `"refused: <unrenderable rejection value>"`)
}

// SIGPIPE: a client that closed the daemon's stdout and stderr cannot kill
// it; it still tears down and exits 0 on stdin EOF.
func TestClosedOutputs(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(daemonBin)
	cmd.Env = environ(t, map[string]string{"CODERUN_LOG_LEVEL": "debug"})
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdout.Close()
	stderr.Close()
	for i := 0; i < 20; i++ {
		stdin.Write(frame(`{"jsonrpc":"2.0","id":` + itoa(i) + `,"method":"initialize"}`))
	}
	stdin.Write(frame(`{"jsonrpc":"2.0","id":99,"method":"run","params":{"program":"print('x')\nreturn 1"}}`))
	time.Sleep(time.Second)
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("no exit")
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() || ws.ExitStatus() != 0 {
		t.Errorf("daemon ended %v", cmd.ProcessState)
	}
}

// docs/child-protocol-wire.md §2.9: a client frame that is not valid JSON gets −32700
// (id null); the call it was meant for stays in flight and a later valid
// answer still resolves it.
func TestBrokenAnswerKeepsCallInFlight(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	d.behave("f", hang)
	id := d.request("run", prog("return await tools.f()", `"bindings":[{"global":"tools","functions":["f"]}]`))
	call := d.waitEvent(func(m *msg) bool { return m.Method == "binding/call" }, 30*time.Second)
	d.send(`{"jsonrpc":"2.0","id":` + string(call.ID) + `,"result":[1,}`)
	expectError(t, d.wait("null"), -32700, "parse error: the message body is not valid JSON")
	d.send(`{"jsonrpc":"2.0","id":` + string(call.ID) + `,"result":"fixed"}`)
	expectOK(t, d.result(d.wait(id)), `"fixed"`)
}
