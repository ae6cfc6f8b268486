package rpc

import (
	"bytes"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wire"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

type nullRunner struct{}

func (nullRunner) Submit(string, protocol.RunParams, session.Client, func(protocol.Result)) (wire.Canceler, error) {
	return nopCanceler{}, nil
}
func (nullRunner) Shutdown()       {}
func (nullRunner) QueueFull() bool { return false }

type nopCanceler struct{}

func (nopCanceler) Cancel() {}

var fuzzSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
	`{"jsonrpc":"2.0","id":2,"method":"run","params":{"program":"return 1","bindings":[{"global":"t","functions":["a"],"errorClass":{"name":"E","memberNameProperty":"m"}}],"limits":{"maxWallMs":1e3},"stream":true}}`,
	`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":2}}`,
	`{"jsonrpc":"2.0","id":3,"method":"shutdown"}`,
	`{"jsonrpc":"2.0","id":1,"result":[1,2,{"a":"\ud800"}]}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":7}}`,
	`[1,2]`, `"x"`, `{"id":-1,"method":"run"}`, `{"id":"\ud800","method":"x"}`,
	"{\"id\":1,\"result\":\"\xff\"}", "{\"id\":1,\"method\":\"<\xff>\"}", `{"id":"<&>","method":"\u2028\ud800"}`,
}

// FuzzHandle: no body makes the server panic or hang (Appendix B item 14),
// and whatever the body, each message the server answers with is strict JSON
// that starts with "jsonrpc" (the Lax scan of the body never leaks invalid
// UTF-8 into a reply).
func FuzzHandle(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var out bytes.Buffer
		s := New(Options{In: strings.NewReader(""), Out: &out, Daemon: testDaemon(), Runner: nullRunner{}})
		s.handle([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize"}`))
		s.handle(body)
		s.awaitShutdownReply() // the one reply written from another goroutine
		r := newFrameReader(&out)
		for reply, err := r.next(); err == nil; reply, err = r.next() {
			if !bytes.HasPrefix(reply, []byte(`{"jsonrpc":"2.0",`)) || !wireguard.Valid(reply, wireguard.Strict) {
				t.Fatalf("reply %q", reply)
			}
		}
	})
}

// FuzzFrames: no byte stream makes the frame reader panic or over-read.
func FuzzFrames(f *testing.F) {
	f.Add([]byte("Content-Length: 2\r\n\r\n{}"))
	f.Add([]byte("content-length:  3 \r\nX: y\r\n\r\nabc"))
	f.Add([]byte("Content-Length: 99999999999999999999\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newFrameReader(strings.NewReader(string(b)))
		for i := 0; i < 10; i++ {
			body, err := r.next()
			if err != nil {
				return
			}
			if len(body) > len(b) {
				t.Fatal("body longer than the input")
			}
		}
	})
}
