package coderun

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

type pipeRW struct {
	io.Reader
	io.WriteCloser
}

// BenchmarkBindingCall is the client's own cost of one binding call: a fake
// daemon on pipes sends binding/call and reads the answer, one at a time
// (make bench's go-client group measures the round trip against a real
// daemon).
func BenchmarkBindingCall(b *testing.B) {
	fromClient, toDaemon := io.Pipe()
	fromDaemon, toClient := io.Pipe()
	defer fromClient.Close()
	defer toClient.Close()
	c := connect(NewObjectStream(pipeRW{fromDaemon, toDaemon}), Options{}, nil, false)
	defer c.conn.Close()
	echo := Untyped("echo", func(_ context.Context, a json.RawMessage) (any, error) { return a, nil })
	c.runs[jsonrpc2.ID{Num: 1}] = &runState{functions: map[string]map[string]Function{"tools": {"echo": echo}}}
	answers := bufio.NewReader(fromClient)
	b.ResetTimer()
	for i := range b.N {
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) +
			`,"method":"binding/call","params":{"runId":1,"namespace":"tools","function":"echo","args":` + strconv.Itoa(i) + `}}`
		if _, err := fmt.Fprintf(toClient, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			b.Fatal(err)
		}
		if err := skipFrame(answers); err != nil {
			b.Fatal(err)
		}
	}
}

// skipFrame reads one LSP frame.
func skipFrame(r *bufio.Reader) error {
	n := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
		if line == "\r\n" {
			break
		}
	}
	_, err := io.CopyN(io.Discard, r, int64(n))
	return err
}
