package rpc_test

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/internal/lspclient"
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

	client := lspclient.New(toServer, fromServer, lspclient.Options{
		// The program's binding call: tools.add({"a": 1, "b": 2}) answers 3.
		OnRequest: func(m *lspclient.Message, reply lspclient.Reply) { reply.Result([]byte(`3`)) },
	})
	ctx := context.Background()
	show := func(m *lspclient.Message, err error) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(string(m.Raw))
	}
	show(client.Call(ctx, "initialize", []byte(`{"clientInfo":{"name":"example"}}`)))
	m, err := client.Call(ctx, "run", []byte(`{"program":"return await tools.add({'a': 1, 'b': 2})",`+
		`"bindings":[{"global":"tools","functions":["add"]}]}`))
	if err == nil {
		fmt.Println(strings.SplitN(string(m.Raw), `,"logs"`, 2)[0], "…")
	}
	show(client.Call(ctx, "run", []byte(`{"program":7}`)))
	show(client.Call(ctx, "shutdown", nil))
	client.Notify("exit", nil)
	fmt.Println("exit code", <-exited)
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"serverInfo":{"name":"coderun-rpc","version":"example"},"capabilities":{"languages":["python"],"isolation":"process","isolationReason":"CODERUN_ISOLATION=process","logStreaming":true,"limits":{"cpuSeconds":10,"maxWallMs":30000,"addressSpaceMb":1024,"maxLogBytes":65536,"maxValueBytes":65536,"graceMs":2000,"maxConcurrentRuns":1},"python":{"executable":"python3","version":"3.x","preload":[]},"sessions":{"max":0,"idleTimeoutMs":0,"fork":false}}}}
	// {"jsonrpc":"2.0","id":2,"result":{"value":3 …
	// {"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"program must be a string"}}
	// {"jsonrpc":"2.0","id":4,"result":null}
	// exit code 0
}
