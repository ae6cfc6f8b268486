package session

import (
	"slices"
	"sync"
	"testing"
)

// The writer finishes a reply that an inline write left cut before the run
// frame or any queued reply, so no frame lands inside another.
func TestNextWriteFinishesCutReplyFirst(t *testing.T) {
	r := &Run{}
	r.wcond = sync.NewCond(&r.mu)
	r.wRest, r.wRun, r.wq = []byte("ly}\n"), []byte("run\n"), [][]byte{[]byte("queued\n")}
	var got []string
	for range 3 {
		frame, _ := r.nextWrite()
		got = append(got, string(frame))
		r.wbusy = false // the write completed
	}
	if want := []string{"ly}\n", "run\n", "queued\n"}; !slices.Equal(got, want) {
		t.Errorf("write order %q, want %q", got, want)
	}
}
