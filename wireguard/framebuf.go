package wireguard

import "sync"

// Frame buffers: the Framers of all runs share a pool of at most frameBufsKept
// idle buffers of minFrameBuf to maxPooledFrameBuf bytes, so the idle pool
// holds at most 2 × 4 MiB. A buffer in use is bounded by its Framer's cap (a
// frame over it decides the run before anything beyond the cap is
// allocated); a larger one, or one the pool has no room for, is left to the
// garbage collector. sync.Pool is not used: it empties on every other GC,
// and a run that returns a megabyte image triggers one.
const (
	minFrameBuf       = 64 << 10 // a pipe's capacity: the smallest buffer a Framer allocates
	maxPooledFrameBuf = 4 << 20  // holds the frame of a 2 MiB image
	frameBufsKept     = 2
)

var frameBufs struct {
	mu   sync.Mutex
	idle [][]byte
}

// getFrameBuf takes the smallest idle buffer of capacity ≥ n, empty, or nil.
func getFrameBuf(n int) []byte {
	frameBufs.mu.Lock()
	defer frameBufs.mu.Unlock()
	best := -1
	for i, b := range frameBufs.idle {
		if cap(b) >= n && (best < 0 || cap(b) < cap(frameBufs.idle[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := frameBufs.idle[best]
	frameBufs.idle = append(frameBufs.idle[:best], frameBufs.idle[best+1:]...)
	return b[:0]
}

// putFrameBuf offers b, which no one uses any more, to the pool: kept when its
// size is in range and there is room, or in place of a smaller idle one. It
// returns nil, for the caller's field.
func putFrameBuf(b []byte) []byte {
	if cap(b) < minFrameBuf || cap(b) > maxPooledFrameBuf {
		return nil
	}
	frameBufs.mu.Lock()
	defer frameBufs.mu.Unlock()
	if len(frameBufs.idle) < frameBufsKept {
		frameBufs.idle = append(frameBufs.idle, b[:0])
		return nil
	}
	for i, idle := range frameBufs.idle {
		if cap(idle) < cap(b) {
			frameBufs.idle[i] = b[:0]
			return nil
		}
	}
	return nil
}
