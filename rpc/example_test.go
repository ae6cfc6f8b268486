package rpc_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/config"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/rpc"
)

// A server driven over pipes the way a client drives the daemon over stdio:
// initialize, shutdown, exit. Every message is LSP-framed; every response has
// the same member order.
func ExampleServer_Serve() {
	cfg := &config.Config{Python: "/usr/bin/python3", PythonVersion: "3.12.1", Isolation: "process",
		Limits:  protocol.Limits{CPUSeconds: 10, MaxWallMs: 30000, AddressSpaceMb: 1024, MaxLogBytes: 65536, MaxValueBytes: 65536},
		GraceMs: 2000, MaxConcurrentRuns: 1, MaxQueuedRuns: 8}
	stdin, client := io.Pipe()
	replies, stdout := io.Pipe()
	srv := rpc.New(rpc.Options{In: stdin, Out: stdout, Config: cfg, Runner: rpc.NewRunner(cfg, nil), Version: "example"})
	exited := make(chan int)
	go func() { exited <- srv.Serve(context.Background()); stdout.Close() }()

	r := bufio.NewReader(replies)
	send := func(body string) { fmt.Fprintf(client, "Content-Length: %d\r\n\r\n%s", len(body), body) }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"example"}}}`)
	fmt.Println(readMessage(r))
	send(`{"jsonrpc":"2.0","id":2,"method":"run","params":{"program":7}}`)
	fmt.Println(readMessage(r))
	send(`{"jsonrpc":"2.0","id":3,"method":"shutdown"}`)
	fmt.Println(readMessage(r))
	send(`{"jsonrpc":"2.0","method":"exit"}`)
	fmt.Println("exit code", <-exited)
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"serverInfo":{"name":"coderun-rpc","version":"example"},"capabilities":{"languages":["python"],"isolation":"process","logStreaming":true,"limits":{"cpuSeconds":10,"maxWallMs":30000,"addressSpaceMb":1024,"maxLogBytes":65536,"maxValueBytes":65536,"graceMs":2000,"maxConcurrentRuns":1},"python":{"executable":"/usr/bin/python3","version":"3.12.1"}}}}
	// {"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"program must be a string"}}
	// {"jsonrpc":"2.0","id":3,"result":null}
	// exit code 0
}

// readMessage reads one LSP-framed message body (a Content-Length header is
// all the daemon sends).
func readMessage(r *bufio.Reader) string {
	var n int
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err.Error()
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err.Error()
	}
	return string(body)
}
