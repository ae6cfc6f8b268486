package coderun_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	coderun "github.com/coderun-rpc/coderun-rpc/clients/go"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// start runs a daemon for one test and closes it when the test ends.
func start(t *testing.T, env ...string) *coderun.Client {
	t.Helper()
	c, err := coderun.Start(context.Background(), coderun.Options{Env: append([]string{"CODERUN_LOG_LEVEL=warn"}, env...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// C890: a program's value reaches the caller as the daemon's bytes: an
// integer beyond 2^53 that a double holds stays exact, and so do a nested
// object's member order and a string's escapes. Close is idempotent and a
// run after it is ErrConnectionLost.
func TestC890ValueLossless(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	res, err := c.Run(context.Background(), `return {"big": 2**62 + 2**10, "z": 1, "a": [1.5, "\u2028"]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"big\":4611686018427388928,\"z\":1,\"a\":[1.5,\"\u2028\"]}" // U+2028 raw, as the daemon writes it
	if string(res.Value) != want {
		t.Fatalf("value %s, want %s", res.Value, want)
	}
	if res.Stats.WallMs < 0 || res.Logs == nil {
		t.Fatalf("result %+v", res)
	}
	if err := c.Close(); err != nil { // and again at the test's end: Close is idempotent
		t.Fatal(err)
	}
	if _, err := c.Run(context.Background(), "return 1", nil); !errors.Is(err, coderun.ErrConnectionLost) {
		t.Fatalf("a run after Close: %v", err)
	}
}

// C891: an untyped binding receives the program's argument as lossless JSON
// and answers with a value; a HostError picks the program's exception type;
// an ErrorClass names the failing function.
func TestC891UntypedBinding(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	var seen []string
	var mu sync.Mutex
	echo := coderun.Untyped("echo", func(_ context.Context, args json.RawMessage) (any, error) {
		mu.Lock()
		seen = append(seen, string(args))
		mu.Unlock()
		return args, nil
	})
	missing := coderun.Untyped("missing", func(context.Context, json.RawMessage) (any, error) {
		return nil, &coderun.HostError{Type: "KeyError", Message: "user_id"}
	})
	broken := coderun.Untyped("broken", func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("the host says no")
	})
	program := `
a = await tools.echo({"n": 2**60, "s": "x"})
try:
    await tools.missing()
except KeyError as e:
    k = str(e)
try:
    await other.broken(1)
except ToolError as e:
    b = [e.tool, str(e)]
return [a, k, b]`
	res, err := c.Run(context.Background(), program, &coderun.RunOptions{Bindings: []coderun.Binding{
		{Global: "tools", Functions: []coderun.Function{echo, missing}},
		{Global: "other", Functions: []coderun.Function{broken}, ErrorClass: &coderun.ErrorClass{Name: "ToolError", MemberNameProperty: "tool"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"n":1152921504606846976,"s":"x"},"'user_id'",["broken","the host says no"]]`
	if string(res.Value) != want {
		t.Fatalf("value %s, want %s", res.Value, want)
	}
	if len(seen) != 1 || seen[0] != `{"n":1152921504606846976,"s":"x"}` {
		t.Fatalf("the binding saw %q", seen)
	}
	if res.Stats.BindingCalls != 3 {
		t.Fatalf("bindingCalls %d, want 3", res.Stats.BindingCalls)
	}
}

type addArgs struct {
	A int64 `json:"a" jsonschema:"the first addend"`
	B int64 `json:"b"`
}

// C892: a typed binding from a Go function: the schemas come from its Go
// types, the program calls it with positional and keyword arguments, the
// daemon refuses a wrong argument before the host sees it, describe shows
// the stub, and an integer beyond 2^53 is decoded into int64 exactly.
func TestC892TypedBinding(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	var calls int
	add, err := coderun.Typed("add", "Adds two integers.", func(_ context.Context, in addArgs) (int64, error) {
		calls++
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	bindings := []coderun.Binding{{Global: "calc", Functions: []coderun.Function{add}}}
	program := `
s = await calc.add(2**60, b=256)
try:
    await calc.add("x", 1)
except TypeError as e:
    return [s, str(e)]`
	res, err := c.Run(context.Background(), program, &coderun.RunOptions{Bindings: bindings})
	if err != nil {
		t.Fatal(err)
	}
	var got []json.RawMessage
	if err := json.Unmarshal(res.Value, &got); err != nil || len(got) != 2 {
		t.Fatalf("value %s", res.Value)
	}
	if string(got[0]) != "1152921504606847232" || !strings.Contains(string(got[1]), "calc.add(): invalid arguments: /a") {
		t.Fatalf("value %s", res.Value)
	}
	if calls != 1 {
		t.Fatalf("the host saw %d calls, want 1 (the invalid one stops in the daemon)", calls)
	}
	stubs, err := c.Describe(context.Background(), bindings, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stubs, "async def add(self, a: int, b: int) -> int:") || !strings.Contains(stubs, "the first addend") {
		t.Fatalf("stubs:\n%s", stubs)
	}
	if _, err := coderun.Typed("bad", "", func(context.Context, int) (int, error) { return 0, nil }); err == nil {
		t.Fatal("Typed accepted parameters that are not a struct")
	}
}

// C893: a failing program is an error value: *RunError with its kind and
// details, and the Result with the logs captured; a refused request is the
// daemon's *jsonrpc2.Error with its code and message.
func TestC893ErrorsAsValues(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	res, err := c.Run(context.Background(), "print('before')\nreturn 1/0", nil)
	var runErr *coderun.RunError
	if !errors.As(err, &runErr) || runErr.Kind != "exception" || runErr.ExceptionType != "ZeroDivisionError" || runErr.Line != 2 {
		t.Fatalf("err %#v", err)
	}
	if res == nil || len(res.Logs) != 1 || res.Logs[0] != "before" || res.Value != nil {
		t.Fatalf("result %+v", res)
	}
	_, err = c.Run(context.Background(), "return 1", &coderun.RunOptions{Limits: &coderun.Limits{MaxWallMs: math.MaxInt64}})
	var rpcErr *jsonrpc2.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 || !strings.HasPrefix(rpcErr.Message, "limits.maxWallMs") {
		t.Fatalf("err %#v", err)
	}
	res, err = c.Run(context.Background(), "return float('nan')", nil)
	if !errors.As(err, &runErr) || runErr.Kind != "invalid-output" || runErr.Path != "$" {
		t.Fatalf("err %#v, result %+v", err, res)
	}
}

// C894: cancelling Run's context cancels the run: the daemon settles it
// abort, Run returns that *RunError unwrapping to context.Canceled, and the
// binding call in flight sees its own context end (the daemon withdrew it).
func TestC894CancelByContext(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	withdrawn := make(chan error, 1)
	wait := coderun.Untyped("wait", func(callCtx context.Context, _ json.RawMessage) (any, error) {
		cancel() // the program is inside the binding now
		<-callCtx.Done()
		withdrawn <- callCtx.Err()
		return nil, callCtx.Err()
	})
	res, err := c.Run(ctx, "await tools.wait()\nreturn 'not reached'", &coderun.RunOptions{
		Bindings: []coderun.Binding{{Global: "tools", Functions: []coderun.Function{wait}}}})
	var runErr *coderun.RunError
	if !errors.As(err, &runErr) || runErr.Kind != "abort" || runErr.Message != "run cancelled by the client" {
		t.Fatalf("err %#v, result %+v", err, res)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v does not unwrap to context.Canceled", err)
	}
	if e := <-withdrawn; !errors.Is(e, context.Canceled) {
		t.Fatalf("the binding's context ended with %v", e)
	}
	// The connection serves on.
	if res, err := c.Run(context.Background(), "return 2", nil); err != nil || string(res.Value) != "2" {
		t.Fatalf("after the cancel: %v %+v", err, res)
	}
}

// C895: streaming: OnLog's events, joined by index, are the result's logs,
// and reach the caller before a binding call the program makes after
// printing; OnOutput sees each displayed object.
func TestC895Streaming(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	var mu sync.Mutex
	var joined []string
	var outputs []coderun.Output
	var atCall int
	mark := coderun.Untyped("mark", func(context.Context, json.RawMessage) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		atCall = len(joined)
		return nil, nil
	})
	program := `
print("one")
print("two", end="", flush=True)
print(" more")
await tools.mark()
display({"a": 1})
return 0`
	res, err := c.Run(context.Background(), program, &coderun.RunOptions{
		Bindings: []coderun.Binding{{Global: "tools", Functions: []coderun.Function{mark}}},
		OnLog: func(ev coderun.LogEvent) {
			mu.Lock()
			defer mu.Unlock()
			for len(joined) <= ev.Index {
				joined = append(joined, "")
			}
			joined[ev.Index] += ev.Text
		},
		OnOutput: func(o coderun.Output) { outputs = append(outputs, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(joined, "\n") != strings.Join(res.Logs, "\n") || len(res.Logs) != 2 || res.Logs[1] != "two more" {
		t.Fatalf("streamed %q, logs %q", joined, res.Logs)
	}
	if atCall != 2 {
		t.Fatalf("the binding call came after %d streamed entries, want 2", atCall)
	}
	if len(outputs) != 1 || outputs[0].Data["text/plain"] != "{'a': 1}" || len(res.Outputs) != 1 {
		t.Fatalf("outputs %+v, result's %+v", outputs, res.Outputs)
	}
}

// C896: files in and out: bytes handed to the run are the bytes it reads,
// and what it leaves under out/ comes back decoded.
func TestC896Files(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	in := []byte{0, 1, 2, 255, '\n'}
	program := `
data = open("data/in.bin", "rb").read()
open("out/copy.bin", "wb").write(data + b"!")
return len(data)`
	res, err := c.Run(context.Background(), program, &coderun.RunOptions{Files: []coderun.File{{Path: "data/in.bin", Data: in}}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Value) != "5" || len(res.Files) != 1 {
		t.Fatalf("result %+v", res)
	}
	f := res.Files[0]
	if f.Path != "out/copy.bin" || f.Size != 6 || string(f.Data) != string(append(in, '!')) || f.Omitted {
		t.Fatalf("file %+v", f)
	}
}

// C897: sessions: state persists across runs, a fork sees it and then
// diverges, a closed session's id is refused with -32004.
func TestC897SessionFork(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	ctx := context.Background()
	s, err := c.OpenSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, "n = 41", nil); err != nil {
		t.Fatal(err)
	}
	f, err := s.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Run(ctx, "n = 0", nil); err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, "return n + 1", nil)
	if err != nil || string(res.Value) != "42" || res.Session == nil || res.Session.ID != s.ID || !res.Session.Alive || res.Session.Runs != 2 {
		t.Fatalf("source: %v %+v", err, res)
	}
	res, err = f.Run(ctx, "return n", nil)
	if err != nil || string(res.Value) != "0" {
		t.Fatalf("fork: %v %+v", err, res)
	}
	for _, x := range []*coderun.Session{f, s} {
		if err := x.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.Run(ctx, "return n", nil)
	var rpcErr *jsonrpc2.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32004 {
		t.Fatalf("a closed session's run: %v", err)
	}
}

// C898: a binding result that is not lossless JSON is never sent as
// something else: the program raises with the documented message.
func TestC898BindingResultNotLossless(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	nan := coderun.Untyped("nan", func(context.Context, json.RawMessage) (any, error) { return math.NaN(), nil })
	beyond := coderun.Untyped("beyond", func(context.Context, json.RawMessage) (any, error) {
		return json.RawMessage("9007199254740993"), nil
	})
	program := `
out = []
for f in (tools.nan, tools.beyond):
    try:
        await f()
    except RuntimeError as e:
        out.append(str(e))
return out`
	res, err := c.Run(context.Background(), program, &coderun.RunOptions{
		Bindings: []coderun.Binding{{Global: "tools", Functions: []coderun.Function{nan, beyond}}}})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	if json.Unmarshal(res.Value, &msgs) != nil || len(msgs) != 2 {
		t.Fatalf("value %s", res.Value)
	}
	for _, m := range msgs {
		if !strings.HasPrefix(m, "binding resolution must be lossless JSON") {
			t.Fatalf("messages %q", msgs)
		}
	}
}

// C899: a daemon that cannot start is named with its reason: Start fails
// with ErrConnectionLost carrying the daemon's exit and the last of its log.
func TestC899DaemonLost(t *testing.T) {
	leakcheck.Check(t)
	_, err := coderun.Start(context.Background(), coderun.Options{Env: []string{"CODERUN_MAX_WALL_MS=10s"}})
	if !errors.Is(err, coderun.ErrConnectionLost) || !strings.Contains(err.Error(), `CODERUN_MAX_WALL_MS="10s"`) ||
		!strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("err %v", err)
	}
	_, err = coderun.Start(context.Background(), coderun.Options{Command: []string{filepath.Join(t.TempDir(), "absent")}})
	if err == nil || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("err %v", err)
	}
}

var servingLine = regexp.MustCompile(`msg=serving listen=(\S+)`)

// serve runs `coderun-rpc serve --listen listen` and returns the address it
// listens on, once it says so.
func serve(t *testing.T, listen string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Getenv("CODERUN_RPC_BIN"), "serve", "--listen", listen)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	addr := ""
	for addr == "" && lines.Scan() {
		if m := servingLine.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	drained := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, stderr); close(drained) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-drained
		_ = cmd.Wait()
	})
	if addr == "" {
		t.Fatal("serve ended before it listened")
	}
	return addr
}

// C900: Connect speaks to `serve` on a unix socket with a token and on a
// WebSocket, with Start's API (a binding and a session); a wrong token is
// ErrConnectionLost with the daemon's reason.
func TestC900Connect(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	sock := "unix:" + filepath.Join(t.TempDir(), "s.sock")
	serve(t, sock, "CODERUN_AUTH_TOKEN=tok-1", "CODERUN_LOG_LEVEL=info")
	addrs := map[string]coderun.Options{
		sock: {Token: "tok-1"},
		"ws://" + serve(t, "ws://127.0.0.1:0/rpc", "CODERUN_LOG_LEVEL=info") + "/rpc": {},
	}
	double := coderun.Untyped("double", func(_ context.Context, args json.RawMessage) (any, error) {
		return json.RawMessage(`[` + string(args) + `,` + string(args) + `]`), nil
	})
	for addr, opts := range addrs {
		c, err := coderun.Connect(ctx, addr, opts)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		s, err := c.OpenSession(ctx, nil)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		res, err := s.Run(ctx, "return await tools.double(2**55)", &coderun.RunOptions{
			Bindings: []coderun.Binding{{Global: "tools", Functions: []coderun.Function{double}}}})
		if err != nil || string(res.Value) != "[36028797018963968,36028797018963968]" {
			t.Fatalf("%s: %v %+v", addr, err, res)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
	}
	_, err := coderun.Connect(ctx, sock, coderun.Options{Token: "wrong"})
	if !errors.Is(err, coderun.ErrConnectionLost) || !strings.HasSuffix(err.Error(), "the daemon refused the connection: authentication failed: wrong bearer token") {
		t.Fatalf("a wrong token: %v", err)
	}
}

// C905: the running daemon's rpc.discover is docs/openrpc.json, and every
// request the document says a client may send is served (never −32601) by a
// real daemon.
func TestC905DiscoverMatchesDaemon(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	ctx := context.Background()
	doc, err := c.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("../../docs/openrpc.json")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, file); err != nil {
		t.Fatal(err)
	}
	if string(doc) != want.String() {
		t.Fatalf("rpc.discover is not docs/openrpc.json:\n%.300s…", doc)
	}
	var parsed struct {
		Methods []struct {
			Name         string `json:"name"`
			From         string `json:"x-from"`
			Notification bool   `json:"x-notification"`
		} `json:"methods"`
	}
	if err := json.Unmarshal(doc, &parsed); err != nil {
		t.Fatal(err)
	}
	served := 0
	for _, m := range parsed.Methods {
		if m.From != "client" || m.Notification || m.Name == "initialize" || m.Name == "shutdown" {
			continue // initialize and shutdown are Start's and Close's
		}
		var raw json.RawMessage
		err := c.Call(ctx, m.Name, map[string]any{}, &raw)
		var rpcErr *jsonrpc2.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == -32601 {
			t.Errorf("%s is documented and not served", m.Name)
		}
		served++
	}
	if served < 6 {
		t.Fatalf("only %d documented requests tried", served)
	}
}

// C907: a binding's argument reaches the Go function as the daemon sent it,
// byte for byte: member order, a lone surrogate and characters
// encoding/json would escape are kept (the library's Request decodes params
// into a map and re-marshals them, which sorts keys and replaces a lone
// surrogate with U+FFFD), and echoed back it is the program's value again.
func TestC907BindingArgsExact(t *testing.T) {
	leakcheck.Check(t)
	c := start(t)
	var got json.RawMessage
	echo := coderun.Untyped("echo", func(_ context.Context, args json.RawMessage) (any, error) {
		got = append(json.RawMessage(nil), args...)
		return args, nil
	})
	res, err := c.Run(context.Background(), `v = {"z": 1, "a": "\ud800", "<&>": [2**60, 0.1]}
back = await tools.echo(v)
return [back == v, len(back["a"]), ord(back["a"])]`, &coderun.RunOptions{
		Bindings: []coderun.Binding{{Global: "tools", Functions: []coderun.Function{echo}}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"z":1,"a":"\ud800","<&>":[1152921504606846976,0.1]}`; string(got) != want {
		t.Fatalf("the binding received %s, want %s", got, want)
	}
	if string(res.Value) != "[true,1,55296]" {
		t.Fatalf("value %s", res.Value)
	}
}

// C911: concurrency: four runs side by side, each gathering 100 binding
// calls the host answers out of order; every answer reaches its own call
// (the answers are written beside the library's own writes, the params are
// taken by the right call).
func TestC911ConcurrentRunsAndCalls(t *testing.T) {
	leakcheck.Check(t)
	c := start(t, "CODERUN_MAX_CONCURRENT_RUNS=4")
	release := make(chan struct{})
	var mu sync.Mutex
	pending := 0
	echo := coderun.Untyped("echo", func(_ context.Context, args json.RawMessage) (any, error) {
		mu.Lock()
		pending++
		if pending == 400 {
			close(release) // every call of every run is in flight: answer them all at once
		}
		mu.Unlock()
		<-release
		return args, nil
	})
	program := `import asyncio
got = await asyncio.gather(*(tools.echo({"run": R, "i": i}) for i in range(100)))
return all(g == {"run": R, "i": i} for i, g in enumerate(got))`
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Run(context.Background(), strings.ReplaceAll(program, "R", strconv.Itoa(r)), &coderun.RunOptions{
				Bindings: []coderun.Binding{{Global: "tools", Functions: []coderun.Function{echo}}}})
			if err == nil && string(res.Value) != "true" {
				err = fmt.Errorf("run %d: %s", r, res.Value)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
