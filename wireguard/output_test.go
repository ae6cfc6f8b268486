package wireguard

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// C400: output frames are checked where they lie and billed (docs/protocol.md
// §12.4): 32 an output, 8 an entry plus its type, a text as its canonical JSON
// string without quotes, a binary in decoded bytes.
func TestDecodeOutputFrame(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nabc"))
	cases := []struct {
		line string
		ok   bool
		size int64
		data string
	}{
		{`{"type":"output","data":{"text/plain":"h\u00e9"}}`, true, 32 + 8 + 10 + 3, `{"text/plain":"hé"}`},
		{`{"type":"output","data":{"image/png":"` + png + `","text/plain":"x"}}`, true, 32 + 8 + 9 + 11 + 8 + 10 + 1, `{"image/png":"` + png + `","text/plain":"x"}`},
		{`{"type":"output","truncated":true}`, true, 0, ""},
		{`{"type":"output","data":{ "text/plain" : "ab" }}`, true, 32 + 8 + 10 + 2, `{"text/plain":"ab"}`},
		{`{"type":"output","data":{"text/plain":"\u0001\"\ud800"}}`, true, 32 + 8 + 10 + 6 + 2 + 6, `{"text/plain":"\u0001\"\ud800"}`},
		{`{"type":"output","data":{"":""}}`, false, 0, ""},
		{`{"type":"output","data":{}}`, false, 0, ""},
		{`{"type":"output","data":{"image/png":"abc"}}`, false, 0, ""},            // not a multiple of 4
		{`{"type":"output","data":{"image/png":"ab=c"}}`, false, 0, ""},           // padding inside
		{`{"type":"output","data":{"image/png":"YR=="}}`, false, 0, ""},           // non-zero tail bits
		{`{"type":"output","data":{"image/png":"YQ\u003d\u003d"}}`, false, 0, ""}, // escapes
		{`{"type":"output","data":{"text/plain":1}}`, false, 0, ""},
		{`{"type":"output","data":{"text/plain":"a","text/plain":"b"}}`, false, 0, ""},
		{`{"type":"output","data":"x"}`, false, 0, ""},
		{`{"type":"output"}`, false, 0, ""},
	}
	for _, c := range cases {
		f, ok := DecodeFrame([]byte(c.line))
		if ok != c.ok {
			t.Errorf("%s: ok = %v, want %v", c.line, ok, c.ok)
			continue
		}
		if !ok || f.Truncated {
			continue
		}
		if f.DataSize != c.size {
			t.Errorf("%s: size %d, want %d", c.line, f.DataSize, c.size)
		}
		if got, fast := string(OutputData(f.Data)), string(f.OutputCopy()); got != c.data || fast != c.data {
			t.Errorf("%s: data %s (fast copy %s), want %s", c.line, got, fast, c.data)
		}
	}
}

// C445: an output of more than 64 MIME types is a truncation notice, whatever
// its size; one of exactly 64 is an output.
func TestOutputEntriesCapped(t *testing.T) {
	for n, truncated := range map[int]bool{protocol.MaxOutputEntries: false, protocol.MaxOutputEntries + 1: true, 100000: true} {
		var b strings.Builder
		b.WriteString(`{"type":"output","data":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"text/x-%d":""`, i)
		}
		b.WriteString("}}")
		f, ok := DecodeFrame([]byte(b.String()))
		if !ok || f.Truncated != truncated || !truncated && f.DataSize != protocol.OutputOverhead+int64(n)*protocol.OutputEntryOverhead+keyBytes(n) {
			t.Errorf("%d types: ok %v truncated %v size %d", n, ok, f.Truncated, f.DataSize)
		}
	}
}

// keyBytes is the length of the names text/x-0 … text/x-<n-1>.
func keyBytes(n int) (total int64) {
	for i := range n {
		total += int64(len(fmt.Sprintf("text/x-%d", i)))
	}
	return total
}
