package rpc

import (
	"bytes"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// Library-framed and pre-encoded messages written concurrently never
// interleave: the output parses back into exactly the messages written.
func TestWriterInterleaving(t *testing.T) {
	var out bytes.Buffer
	w := newWriter(&out, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	const n = 200
	for i := 0; i < n; i++ {
		wg.Add(3)
		go func() {
			defer wg.Done()
			id := reqID{text: fmt.Sprint(i), jid: jsonrpc2.ID{Num: uint64(i)}, safe: true}
			w.reply(id, map[string]int{"i": i})
		}()
		go func() {
			defer wg.Done()
			w.frame(encodeBindingCall(uint64(i), `"r"`, "tools", "f", []byte(`[1,2,3]`)))
		}()
		go func() { defer wg.Done(); w.replyError(nil, -32700, "x") }()
	}
	wg.Wait()
	r := newFrameReader(&out)
	count := 0
	for {
		body, err := r.next()
		if err != nil {
			break
		}
		if _, err := scanValue(body, 0, false); err != nil {
			t.Fatalf("frame %d is not JSON: %q", count, body)
		}
		count++
	}
	if count != 3*n {
		t.Errorf("%d frames, want %d", count, 3*n)
	}
}

// A string id jsonrpc2.ID cannot carry exactly (a lone surrogate) is
// answered through the pre-encoded path with the id as sent.
func TestUnsafeIDReply(t *testing.T) {
	var out bytes.Buffer
	w := newWriter(&out, slog.New(slog.DiscardHandler))
	id := usableID(member{raw: []byte(`"a\ud800"`)}, true)
	if id == nil || id.safe {
		t.Fatalf("%+v", id)
	}
	w.reply(*id, nil)
	if got := out.String(); got != "Content-Length: 46\r\n\r\n"+`{"jsonrpc":"2.0","id":"a\ud800","result":null}` {
		t.Errorf("%q", got)
	}
}
