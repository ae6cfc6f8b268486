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

// The scanner on a client's message as rpc reads it (Members in Lax mode) and on the
// same value as session judges it (CheckValue): a 1 MiB binding result of small
// objects, the token-dense case.
func BenchmarkScanResult(b *testing.B) {
	value := "[" + strings.Repeat(`{"text":"some words here, é","n":12345.5,"ok":true},`, 20000) + "0]"
	body := []byte(`{"jsonrpc":"2.0","id":99,"result":` + value + `}`)
	b.Run("members-lax", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := Members(body, Lax); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("checkvalue", func(b *testing.B) {
		b.SetBytes(int64(len(value)))
		for b.Loop() {
			if _, v := CheckValue([]byte(value), 1<<30); v != VerdictOK {
				b.Fatal(v)
			}
		}
	})
}
