package lspclient

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkBindingCall is clients/go's BenchmarkBindingCall on this client:
// a fake daemon on pipes sends binding/call and reads the answer, one at a
// time; the client answers inline, as the bench harness does.
func BenchmarkBindingCall(b *testing.B) {
	fromClient, toDaemon := io.Pipe()
	fromDaemon, toClient := io.Pipe()
	defer fromClient.Close()
	defer toClient.Close()
	New(toDaemon, fromDaemon, Options{OnRequest: func(m *Message, reply Reply) {
		var p struct {
			Args json.RawMessage `json:"args"`
		}
		_ = json.Unmarshal(m.Params, &p)
		_ = reply.Result(p.Args)
	}})
	answers := bufio.NewReader(fromClient)
	b.ResetTimer()
	for i := range b.N {
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) +
			`,"method":"binding/call","params":{"runId":1,"namespace":"tools","function":"echo","args":` + strconv.Itoa(i) + `}}`
		if _, err := fmt.Fprintf(toClient, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			line, err := answers.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
				n, _ = strconv.Atoi(strings.TrimSpace(v))
			}
			if line == "\r\n" {
				break
			}
		}
		if _, err := io.CopyN(io.Discard, answers, int64(n)); err != nil {
			b.Fatal(err)
		}
	}
}
