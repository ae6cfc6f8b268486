package rpc

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// Messages written concurrently never interleave: the output parses back
// into exactly the messages written.
// So do they through a send queue (service mode).
func TestWriterInterleaving(t *testing.T) {
	for _, maxUnsent := range []int64{0, 1 << 30} {
		t.Run(fmt.Sprint("maxUnsent=", maxUnsent), func(t *testing.T) { writeInterleaved(t, maxUnsent) })
	}
}

func writeInterleaved(t *testing.T, maxUnsent int64) {
	var out bytes.Buffer
	w := newWriter(&out, slog.New(slog.DiscardHandler), maxUnsent, nil, nil)
	var wg sync.WaitGroup
	const n = 200
	for i := 0; i < n; i++ {
		wg.Add(3)
		go func() {
			defer wg.Done()
			w.reply(reqID{text: fmt.Sprint(i)}, map[string]int{"i": i})
		}()
		go func() {
			defer wg.Done()
			w.frame(encodeBindingCall(uint64(i), `"r"`, "tools", "f", []byte(`[1,2,3]`), ""))
		}()
		go func() { defer wg.Done(); w.replyError(nil, -32700, "x") }()
	}
	wg.Wait()
	w.finish()
	r := newFrameReader(&out)
	count := 0
	for {
		body, err := r.next()
		if err != nil {
			break
		}
		if !wireguard.Valid(body, wireguard.Strict) {
			t.Fatalf("frame %d is not JSON: %q", count, body)
		}
		count++
	}
	if count != 3*n {
		t.Errorf("%d frames, want %d", count, 3*n)
	}
}

// A string id is echoed as sent, in the canonical string form: a lone
// surrogate stays an escape, "<&>" and U+2028 stay raw (no HTML escaping),
// whether the response is a result or an error.
func TestStringIDEcho(t *testing.T) {
	var out bytes.Buffer
	w := newWriter(&out, slog.New(slog.DiscardHandler), 0, nil, nil)
	id := usableID(wireguard.Member{Value: []byte(`"a\ud800<&>\u2028"`)}, true)
	if id == nil {
		t.Fatal("id refused")
	}
	w.reply(*id, nil)
	w.replyError(id, -32601, "method not found: <x>")
	r := newFrameReader(&out)
	for _, want := range []string{
		`{"jsonrpc":"2.0","id":"a\ud800<&>` + "\u2028" + `","result":null}`,
		`{"jsonrpc":"2.0","id":"a\ud800<&>` + "\u2028" + `","error":{"code":-32601,"message":"method not found: <x>"}}`,
	} {
		if body, err := r.next(); err != nil || string(body) != want {
			t.Errorf("%s (%v)\nwant %s", body, err, want)
		}
	}
}

// A run response is written piece by piece: its Content-Length is exact and
// its body is the whole encoding, also when the logs exceed the write buffer
// and need escaping.
func TestRunResponsePieces(t *testing.T) {
	var out bytes.Buffer
	w := newWriter(&out, slog.New(slog.DiscardHandler), 0, nil, nil)
	big := strings.Repeat("é\"\x01\xed\xa0\x80x", 20000) // beyond 64 KiB encoded
	res := protocol.Result{Value: []byte(`[1]`), Logs: []string{"a", big, ""},
		Stats: protocol.Stats{WallMs: 5, LogBytes: 9}}
	w.pieces(func(put func([]byte)) { emitRunResponse("7", res, put) })
	want := `{"jsonrpc":"2.0","id":7,"result":{"value":[1],"logs":["a",` + string(wireguard.AppendString(nil, big)) +
		`,""],"stats":{"wallMs":5,"cpuMs":0,"maxRssKb":0,"queueMs":0,"bindingCalls":0,"logBytes":9}}}`
	r := newFrameReader(&out)
	body, err := r.next()
	if err != nil || string(body) != want {
		t.Fatalf("err %v, body %d bytes, want %d", err, len(body), len(want))
	}
	if _, err := r.next(); err != io.EOF {
		t.Errorf("bytes after the body: %v", err)
	}
}
