package wireguard

import (
	"encoding/base64"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// imageFrame is the frame of a 1 MiB image, as the child writes it.
var imageFrame = []byte(`{"type":"output","data":{"image/png":"` + base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 1<<20-8)...)) + `","text/plain":"x"}}` + "\n")

// feedReads feeds frame to f in reads of the daemon's 256 KiB, n times.
func feedReads(b *testing.B, feed func([]byte) error) {
	b.SetBytes(int64(len(imageFrame)))
	for b.Loop() {
		for p := imageFrame; len(p) > 0; {
			n := min(len(p), 256<<10)
			if err := feed(p[:n]); err != nil {
				b.Fatal(err)
			}
			p = p[n:]
		}
	}
}

func BenchmarkFramerImage(b *testing.B) {
	f := NewFramer(protocol.FrameCap)
	feedReads(b, func(p []byte) error { _, err := f.Feed(p); return err })
}

// logLinesRead is a 64 KiB read of ordinary log frames.
func logLinesRead() (read []byte) {
	line := []byte(`{"type":"log","text":"a line of a program's output, of ordinary length"}` + "\n")
	for len(read)+len(line) <= 64<<10 {
		read = append(read, line...)
	}
	return read
}

func BenchmarkFramerLogLines(b *testing.B) {
	read := logLinesRead()
	f := NewFramer(protocol.FrameCap)
	b.SetBytes(int64(len(read)))
	for b.Loop() {
		if _, err := f.Feed(read); err != nil {
			b.Fatal(err)
		}
	}
}
