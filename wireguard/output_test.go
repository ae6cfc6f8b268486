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
		// C1239: a checked image and a second member of its name (a client decoding the JSON keeps the last)
		{`{"type":"output","data":{"image/png":"` + png + `","image\/png":"R0lGODlh"}}`, false, 0, ""},
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

// C1162: a raster image whose bytes do not begin as its type's format does is
// set apart (not billed, left out of the copy); an output with nothing else
// keeps no data; text types and other binary types are not judged.
func TestOutputMislabeledImages(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cases := []struct {
		data       string
		mislabeled []string
		kept       string
	}{
		{`{"image/png":"` + b64("\x89PNG\r\n\x1a\n") + `"}`, nil, `{"image/png":"` + b64("\x89PNG\r\n\x1a\n") + `"}`},
		{`{"image/jpeg":"` + b64("\xff\xd8\xff\xe0") + `","image/gif":"` + b64("GIF87a") + `","image/webp":"` + b64("RIFF\x01\x00\x00\x00WEBPVP8 ") + `"}`, nil, ""},
		{`{"image/png":"` + b64("GIF89a") + `","text/plain":"x"}`, []string{"image/png"}, `{"text/plain":"x"}`},
		{`{"image/png":"` + b64("\x89PNG") + `","image/jpeg":"` + b64("<svg/>") + `"}`, []string{"image/png", "image/jpeg"}, ""},
		{`{"image/webp":"` + b64("RIFF\x01\x00\x00\x00WAVE") + `","application/pdf":"` + b64("x") + `"}`, []string{"image/webp"}, `{"application/pdf":"eA=="}`},
		{`{"image/gif":""}`, []string{"image/gif"}, ""},
		{`{"image/svg+xml":"<svg onload='x'/>"}`, nil, `{"image/svg+xml":"<svg onload='x'/>"}`},
		// C1239: a name spelt with escapes is the type it decodes to
		{`{"image\/png":"` + b64("GIF89a") + `","text\u002fplain":"x"}`, []string{"image/png"}, `{"text/plain":"x"}`},
		{`{"\u0069mage/gif":"` + b64("GIF89a\x01\x00\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x30\x75\x30\x75\x00") + `"}`, []string{"image/gif"}, ""},
	}
	for _, c := range cases {
		f, ok := DecodeFrame([]byte(`{"type":"output","data":` + c.data + `}`))
		if !ok || f.Truncated {
			t.Fatalf("%s: ok %v truncated %v", c.data, ok, f.Truncated)
		}
		var got []string
		for _, m := range f.Refused {
			got = append(got, m.Mime)
		}
		if strings.Join(got, ",") != strings.Join(c.mislabeled, ",") {
			t.Errorf("%s: mislabeled %v, want %v", c.data, got, c.mislabeled)
		}
		if len(c.mislabeled) == 0 {
			continue
		}
		if kept := string(f.OutputCopy()); c.kept != "" && kept != c.kept {
			t.Errorf("%s: kept %s, want %s", c.data, kept, c.kept)
		}
		if c.kept == "" && f.Data != nil {
			t.Errorf("%s: data %s, want none", c.data, f.Data)
		}
		if c.kept == `{"text/plain":"x"}` && f.DataSize != 32+8+10+1 {
			t.Errorf("%s: billed %d, want 51 (the kept member only)", c.data, f.DataSize)
		}
	}
}
