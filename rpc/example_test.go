package rpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"

	coderun "github.com/coderun-rpc/coderun-rpc/clients/go"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/rpc"
	"github.com/coderun-rpc/coderun-rpc/session"
)

// A server driven over pipes the way a client drives the daemon over stdio:
// initialize, a run that awaits a binding, a refused run, shutdown, exit.
// Every response starts with the same members in the same order.
func ExampleServer_Serve() {
	python, _ := exec.LookPath("python3")
	limits := protocol.Limits{CPUSeconds: 10, MaxWallMs: 30000, AddressSpaceMb: 1024, MaxLogBytes: 65536, MaxValueBytes: 65536}
	manager := session.NewManager(session.Config{Python: python, Limits: limits, MaxConcurrent: 1, MaxQueued: 8})
	stdin, toServer := io.Pipe()
	fromServer, stdout := io.Pipe()
	srv := rpc.New(rpc.Options{In: stdin, Out: stdout, Runner: rpc.NewRunner(manager), Version: "example",
		Daemon: rpc.Daemon{Limits: limits, GraceMs: 2000, MaxConcurrentRuns: 1, Isolation: "process", IsolationReason: "CODERUN_ISOLATION=process",
			Python: "python3", PythonVersion: "3.x"}})
	exited := make(chan int)
	go func() { exited <- srv.Serve(context.Background()); stdout.Close() }()

	// The client's side at the message level: the Go client's frame stream,
	// each body written and read as it is.
	client := coderun.NewObjectStream(pipe{fromServer, toServer})
	send := func(body string) { _ = client.WriteObject(json.RawMessage(body)) }
	next := func() string {
		var body json.RawMessage
		if err := client.ReadObject(&body); err != nil {
			return err.Error()
		}
		return string(body)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"example"}}}`)
	fmt.Println(next())
	send(`{"jsonrpc":"2.0","method":"initialized","params":{}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"run","params":{"program":"return await tools.add({'a': 1, 'b': 2})",` +
		`"bindings":[{"global":"tools","functions":["add"]}]}}`)
	// The program's binding call: tools.add({"a": 1, "b": 2}) answers 3.
	var call struct{ ID json.RawMessage }
	_ = json.Unmarshal([]byte(next()), &call)
	send(`{"jsonrpc":"2.0","id":` + string(call.ID) + `,"result":3}`)
	fmt.Println(strings.SplitN(next(), `,"logs"`, 2)[0], "…")
	send(`{"jsonrpc":"2.0","id":3,"method":"run","params":{"program":7}}`)
	fmt.Println(next())
	send(`{"jsonrpc":"2.0","id":4,"method":"shutdown"}`)
	fmt.Println(next())
	send(`{"jsonrpc":"2.0","method":"exit"}`)
	fmt.Println("exit code", <-exited)
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"serverInfo":{"name":"coderun-rpc","version":"example"},"capabilities":{"languages":["python"],"isolation":"process","isolationReason":"CODERUN_ISOLATION=process","logStreaming":true,"limits":{"cpuSeconds":10,"maxWallMs":30000,"addressSpaceMb":1024,"maxLogBytes":65536,"maxValueBytes":65536,"graceMs":2000,"maxConcurrentRuns":1},"python":{"executable":"python3","version":"3.x","preload":[]},"sessions":{"max":0,"idleTimeoutMs":0,"fork":false}}}}
	// {"jsonrpc":"2.0","id":2,"result":{"value":3 …
	// {"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"program must be a string"}}
	// {"jsonrpc":"2.0","id":4,"result":null}
	// exit code 0
}

// pipe is the server's output and input as one stream, for the client.
type pipe struct {
	io.Reader
	io.WriteCloser
}
