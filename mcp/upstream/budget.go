package upstream

import (
	"fmt"
	"sync/atomic"
)

// Budget is a run's maxUpstreamBytes (docs/mcp.md §2.5): the bytes of tool
// results its calls may still receive, all servers together. A result is
// billed its whole text as the server sent it; a result the budget cannot
// take is refused, and one the reader sees outgrow it is read past, never
// held whole. Safe for concurrent use.
type Budget struct {
	limit int64
	left  atomic.Int64
}

// NewBudget is a budget of limit bytes.
func NewBudget(limit int64) *Budget {
	b := &Budget{limit: limit}
	b.left.Store(limit)
	return b
}

// room is what the budget may still take.
func (b *Budget) room() int64 { return b.left.Load() }

// take bills n bytes, or reports false, billing nothing, when fewer remain.
func (b *Budget) take(n int64) bool {
	for {
		left := b.left.Load()
		if n > left {
			return false
		}
		if b.left.CompareAndSwap(left, left-n) {
			return true
		}
	}
}

// refusal is the error of a result the budget cannot take.
func (b *Budget) refusal() error { return &TooLarge{Room: b.room(), Limit: b.limit} }

// TooLarge is a result refused because it exceeds what the run may still
// receive from upstream tools; the connection serves on.
type TooLarge struct {
	Room, Limit int64
}

func (e *TooLarge) Error() string {
	return fmt.Sprintf("result refused: it exceeds the %d bytes of upstream results this run may still receive "+
		"(limits.maxUpstreamBytes=%d); ask the tool for less (a filter, a smaller page)", e.Room, e.Limit)
}
