package wireguard

import (
	"encoding/base64"
	"testing"
)

// C400: output frames are checked where they lie and measured in decoded bytes.
func TestDecodeOutputFrame(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nabc"))
	cases := []struct {
		line string
		ok   bool
		size int64
		data string
	}{
		{`{"type":"output","data":{"text/plain":"h\u00e9"}}`, true, 3, `{"text/plain":"hé"}`},
		{`{"type":"output","data":{"image/png":"` + png + `","text/plain":"x"}}`, true, 12, `{"image/png":"` + png + `","text/plain":"x"}`},
		{`{"type":"output","truncated":true}`, true, 0, ""},
		{`{"type":"output","data":{ "text/plain" : "ab" }}`, true, 2, `{"text/plain":"ab"}`},
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
