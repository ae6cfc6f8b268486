package wireguard

import (
	"bytes"
	"strings"
	"testing"
)

// The daemon's log path for the bench's 10 MiB row (1 KiB printed lines), stage by
// stage over one 256 KiB fd-3 read: the Framer, DecodeFrame, the ledger, and the
// response's string encoding.
func BenchmarkLogPath(b *testing.B) {
	for _, c := range []struct{ name, text string }{
		{"ascii", strings.Repeat("x", 1023)},
		{"utf8", strings.Repeat("é", 511)},
	} {
		frame := append(append([]byte(`{"type":"log","text":`), AppendString(nil, c.text)...), "}\n"...)
		read := bytes.Repeat(frame, 256)
		frames, _ := NewFramer(1 << 26).Feed(read)
		texts := make([]string, len(frames))
		for i, line := range frames {
			f, _ := DecodeFrame(line)
			texts[i] = f.Text
		}
		b.Run(c.name+"/feed", func(b *testing.B) {
			b.SetBytes(int64(len(read)))
			for b.Loop() {
				_, _ = NewFramer(1 << 26).Feed(read)
			}
		})
		b.Run(c.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(read)))
			for b.Loop() {
				for _, line := range frames {
					_, _ = DecodeFrame(line)
				}
			}
		})
		b.Run(c.name+"/ledger", func(b *testing.B) {
			b.SetBytes(int64(len(read)))
			for b.Loop() {
				cp := NewCapture(1<<26, nil)
				for _, t := range texts {
					cp.Log(t, false, false)
				}
			}
		})
		b.Run(c.name+"/encode", func(b *testing.B) {
			b.SetBytes(int64(len(read)))
			out := make([]byte, 0, 2*len(read))
			for b.Loop() {
				out = out[:0]
				for _, t := range texts {
					out = AppendString(out, t)
				}
			}
		})
	}
}
