package wireguard

import (
	"encoding/base64"
	"testing"
)

func BenchmarkDecodeOutputMiB(b *testing.B) {
	line := []byte(`{"type":"output","data":{"image/png":"` + base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 1<<20-8)...)) + `","text/plain":"x"}}`)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		f, ok := DecodeFrame(line)
		if !ok {
			b.Fatal("junk")
		}
		f.OutputCopy()
	}
}
