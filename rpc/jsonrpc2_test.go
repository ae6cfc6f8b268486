package rpc

import (
	"context"
	"fmt"
	"io"
	"log"
	"slices"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// libraryPeer serves a stream with github.com/sourcegraph/jsonrpc2 (its LSP
// codec, every request answered −32601) the way the daemon would if it were
// built on the library.
type libraryPeer struct {
	in   *io.PipeWriter // what the client writes
	out  *frameReader   // what the library writes back
	conn *jsonrpc2.Conn
}

type pipeRWC struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (p pipeRWC) Close() error {
	for _, c := range p.closers {
		c.Close()
	}
	return nil
}

func newLibraryPeer(t *testing.T) *libraryPeer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	notFound := jsonrpc2.HandlerWithError(func(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		return nil, &jsonrpc2.Error{Code: -32601, Message: "method not found: " + req.Method}
	})
	stream := jsonrpc2.NewBufferedStream(pipeRWC{inR, outW, []io.Closer{inR, outW}}, jsonrpc2.VSCodeObjectCodec{})
	p := &libraryPeer{in: inW, out: newFrameReader(outR),
		conn: jsonrpc2.NewConn(context.Background(), stream, notFound, jsonrpc2.SetLogger(log.New(io.Discard, "", 0)))}
	t.Cleanup(func() {
		p.conn.Close()
		inW.Close()
		outR.Close()
		<-p.conn.DisconnectNotify()
	})
	return p
}

// C906: what the daemon would lose on github.com/sourcegraph/jsonrpc2
// (docs/child-protocol.md Appendix B item 5, the one place the reason is
// written). The same bytes go to the daemon's server and to a server on the
// library: each case is a message protocol.md §2.2 answers, followed by a
// valid request. The daemon answers both. The library either drops the
// connection without answering the valid request, or (taken) serves the
// malformed body as a request.
func TestC906WhatJSONRPC2WouldLose(t *testing.T) {
	next := `{"jsonrpc":"2.0","id":2,"method":"x"}`
	cases := []struct {
		name, stream, daemon string
		taken                bool // the library serves the malformed body; else it drops the connection there
	}{
		{"not JSON", frame(`{"jsonrpc":"2.0","id":1,"method":`),
			nullErr(-32700, "parse error: the message body is not valid JSON"), false},
		{"bytes after the value", frame(`{"jsonrpc":"2.0","id":1,"method":"x"} x`),
			nullErr(-32700, "parse error: the message body is not valid JSON"), true},
		{"a header name in lower case", "content-length: 37\r\n\r\n" + `{"jsonrpc":"2.0","id":1,"method":"x"}`,
			errResp("1", -32601, "method not found: x"), false},
		{"a body over the cap, answered before it is sent", "Content-Length: 67108865\r\n\r\n",
			nullErr(-32600, "message body of 67108865 bytes exceeds the 67108864-byte limit"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := start(t)
			h.init()
			h.raw(c.stream)
			h.expect(c.daemon)
			if c.name == "a body over the cap, answered before it is sent" {
				h.writes <- make([]byte, 67108865)
			}
			h.send(next)
			h.expect(errResp("2", -32601, "method not found: x"))

			lib := newLibraryPeer(t) // start's leak check covers it
			go func() {
				_, _ = io.WriteString(lib.in, c.stream)
				_, _ = io.WriteString(lib.in, frame(next))
				lib.in.Close() // the end of the stream: a library still reading a body stops there
			}()
			var answered []string
			for {
				body, err := lib.out.next()
				if err != nil {
					break // the library closed the connection
				}
				answered = append(answered, string(body))
			}
			<-lib.conn.DisconnectNotify()
			answer := func(id int) string {
				return fmt.Sprintf(`{"id":%d,"error":{"code":-32601,"message":"method not found: x"},"jsonrpc":"2.0"}`, id)
			}
			switch {
			case c.taken && (len(answered) == 0 || answered[0] != answer(1)):
				t.Fatalf("the library no longer serves %s as a request (Appendix B item 5): %q", c.name, answered)
			case !c.taken && slices.Contains(answered, answer(2)):
				t.Fatalf("the library serves on after %s (Appendix B item 5): %q", c.name, answered)
			}
		})
	}
}

func frame(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }
