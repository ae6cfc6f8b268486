package wireguard

import (
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// BenchmarkBoundedFramerImage is BenchmarkFramerImage through the daemon's
// bounded Framer, the image's room granted.
func BenchmarkBoundedFramerImage(b *testing.B) {
	f := NewBoundedFramer(protocol.FrameCap, protocol.FrameProbe, func(head []byte) int {
		if DeclaredType(head) != protocol.FrameOutput {
			b.Fatal("no type")
		}
		return 8 << 20
	})
	feedReads(b, func(p []byte) error { _, err := f.FeedLines(p); return err })
}

// BenchmarkBoundedFramerLogLines is BenchmarkFramerLogLines through the
// daemon's bounded Framer (the lines are short: never judged).
func BenchmarkBoundedFramerLogLines(b *testing.B) {
	read := logLinesRead()
	f := NewBoundedFramer(protocol.FrameCap, protocol.FrameProbe, func([]byte) int { return 0 })
	b.SetBytes(int64(len(read)))
	for b.Loop() {
		if _, err := f.FeedLines(read); err != nil {
			b.Fatal(err)
		}
	}
}
