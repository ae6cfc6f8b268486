//go:build linux

package child

import (
	"math"

	"golang.org/x/sys/unix"
)

// EffectiveSoftCPU returns the soft RLIMIT_CPU (seconds) a child started now
// will hold after applying requested seconds, i.e. requesting
// (requested, requested+1) clamped by docs/child-protocol-child.md §3.3 against the
// daemon's CURRENT RLIMIT_CPU (read at each call: the kernel raises a soft CPU
// limit by a second every time it sends SIGXCPU, so a value read at start-up
// goes stale). The daemon's own limits are never changed here.
func EffectiveSoftCPU(requested int64) int64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CPU, &rl); err != nil {
		rl = unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	}
	return clampCPU(requested, rl.Cur, rl.Max)
}

// clampCPU is the clamp rule of docs/child-protocol-child.md §3.3 for RLIMIT_CPU, returning
// the soft side: per side min(requested, inherited) unless the inherited side
// is infinite; soft = min(soft, hard); then, for CPU only, if soft == hard and
// hard >= 2, soft = hard - 1 so SIGXCPU can fire before the hard SIGKILL.
func clampCPU(requested int64, inheritedSoft, inheritedHard uint64) int64 {
	if requested < 0 {
		requested = 0
	}
	hardReq := requested
	if hardReq < math.MaxInt64 {
		hardReq++
	}
	soft := clampSide(requested, inheritedSoft)
	hard := clampSide(hardReq, inheritedHard)
	soft = min(soft, hard)
	if soft == hard && hard >= 2 {
		soft = hard - 1
	}
	return soft
}

func clampSide(requested int64, inherited uint64) int64 {
	if inherited == unix.RLIM_INFINITY || inherited >= uint64(requested) {
		return requested
	}
	return int64(inherited)
}
