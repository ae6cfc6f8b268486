package rpc

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
)

type nullRunner struct{}

func (nullRunner) Submit(string, protocol.RunParams, session.Client, func(protocol.Result)) (Canceler, error) {
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
	`{"jsonrpc":"2.0","id":1,"result":[1,2,{"a":"\ud800"}]}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":7}}`,
	`[1,2]`, `"x"`, `{"id":-1,"method":"run"}`, `{"id":"\ud800","method":"x"}`,
	"{\"id\":1,\"result\":\"\xff\"}",
}

// FuzzHandle: no body makes the server panic or hang (Appendix B item 14).
func FuzzHandle(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s := New(Options{In: strings.NewReader(""), Out: io.Discard, Daemon: testDaemon(), Runner: nullRunner{}})
		s.handle([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize"}`))
		s.handle(body)
	})
}

// FuzzScanner: on valid UTF-8, the strict scanner agrees with encoding/json
// about validity, and decodeString agrees with it about string values
// without lone surrogates.
func FuzzScanner(f *testing.F) {
	for _, s := range append(fuzzSeeds, `"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"`, `1e400`, `-0.0`, `[[[[]]]]`, `{"a":1,"a":2}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) || strings.Count(string(b), "[")+strings.Count(string(b), "{") > 5000 {
			return
		}
		i := skipSpace(b, 0)
		r, err := scanValue(b, i, false)
		ours := err == nil && skipSpace(b, r.end) == len(b)
		if theirs := json.Valid(b); ours != theirs {
			t.Fatalf("%q: scanner %v, encoding/json %v", b, ours, theirs)
		}
		if ours && b[i] == '"' && !strings.Contains(strings.ToLower(string(b)), `\ud`) {
			var want string
			json.Unmarshal(b, &want)
			if got, _ := decodeString(b[i:r.end]); got != want {
				t.Fatalf("%q: decoded %q, want %q", b, got, want)
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
