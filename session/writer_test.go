package session

import (
	"slices"
	"testing"
)

// The writer finishes a reply that an inline write left cut before the run
// frame or any queued reply, so no frame lands inside another.
func TestWriterFinishesCutReplyFirst(t *testing.T) {
	wr := &fdWriter{}
	wr.cond.L = &wr.mu
	wr.rest, wr.run, wr.q = []byte("ly}\n"), []byte("run\n"), [][]byte{[]byte("queued\n")}
	var got []string
	for range 3 {
		frame, _, _ := wr.next()
		got = append(got, string(frame))
		wr.busy = false // the write completed
	}
	if want := []string{"ly}\n", "run\n", "queued\n"}; !slices.Equal(got, want) {
		t.Errorf("write order %q, want %q", got, want)
	}
}
