//go:build linux

package child

import (
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

func TestClampCPU(t *testing.T) {
	leakcheck.Check(t)
	const inf = unix.RLIM_INFINITY
	for _, tc := range []struct {
		req        int64
		soft, hard uint64
		want       int64
	}{
		{42, inf, inf, 42}, // default (42, 43)
		{30, 5, inf, 5},    // ulimit -S -t 5
		{30, 2, 2, 1},      // ulimit -t 2 → (1, 2)
		{30, 31, 31, 30},   // (30, 31) already
		{30, 30, 30, 29},   // soft' == hard' == 30 → 29
		{30, inf, 30, 29},  // hard 30 → (30, 30) → 29
		{1, 1, 1, 1},       // hard' 1 < 2: unchanged
		{1, inf, inf, 1},   // (1, 2)
		{30, 0, 0, 0},      // a zero limit stays zero
		{9007199254740990, inf, inf, 9007199254740990},
		{9223372036854775807, inf, inf, 9223372036854775806}, // +1 saturates: soft' == hard'

		{9223372036854775807, inf, 9223372036854775807, 9223372036854775806},
	} {
		if got := clampCPU(tc.req, tc.soft, tc.hard); got != tc.want {
			t.Errorf("clampCPU(%d, %d, %d) = %d, want %d", tc.req, tc.soft, tc.hard, got, tc.want)
		}
	}
}
