package coderun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// C912: a binding/call whose id is a string with a control character is
// answered with that id as valid JSON (the id's Go quoting was not JSON, and
// the answer was never sent), and a $/cancelRequest naming it with another
// spelling of the same string withdraws it.
func TestC912StringIDs(t *testing.T) {
	leakcheck.Check(t)
	fromClient, toDaemon := io.Pipe()
	fromDaemon, toClient := io.Pipe()
	c := connect(NewObjectStream(pipeRW{fromDaemon, toDaemon}), Options{}, nil, false)
	defer func() {
		c.conn.Close()
		fromClient.Close()
		toClient.Close() // the read goroutine's end of the stream
		<-c.conn.DisconnectNotify()
	}()
	withdrawn := make(chan error, 1)
	c.runs[jsonrpc2.ID{Num: 1}] = &runState{functions: map[string]map[string]Function{"tools": {
		"echo": Untyped("echo", func(_ context.Context, a json.RawMessage) (any, error) { return a, nil }),
		"wait": Untyped("wait", func(ctx context.Context, _ json.RawMessage) (any, error) {
			<-ctx.Done()
			withdrawn <- ctx.Err()
			return nil, ctx.Err()
		}),
	}}}
	send := func(body string) {
		t.Helper()
		if _, err := fmt.Fprintf(toClient, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":"a\u0000b","method":"binding/call","params":{"runId":1,"namespace":"tools","function":"echo","args":[1]}}`)
	var answer json.RawMessage
	if err := NewObjectStream(pipeRW{fromClient, toDaemon}).ReadObject(&answer); err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID     string          `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(answer, &got); err != nil || got.ID != "a\x00b" || string(got.Result) != "[1]" {
		t.Fatalf("answer %s: %v", answer, err)
	}
	send(`{"jsonrpc":"2.0","id":"xy","method":"binding/call","params":{"runId":1,"namespace":"tools","function":"wait","args":null}}`)
	send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"\u0078y"}}`)
	if err := <-withdrawn; err != context.Canceled {
		t.Fatalf("the call's context ended with %v", err)
	}
}
