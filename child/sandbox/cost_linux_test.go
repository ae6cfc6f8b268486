//go:build linux

package sandbox

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The per-run cost of the confinement steps the init builds for a program
// (docs/performance.md, sandbox isolation costs): go test -run '^$' -bench .

// BenchmarkLandlockRuleset builds a run's Landlock ruleset, as the fork init
// does for each program (the program's landlock_restrict_self is one call).
func BenchmarkLandlockRuleset(b *testing.B) {
	c := sandboxConf{rw: []string{b.TempDir()}, ro: SystemLibraryDirs(), exec: SystemExecutableDirs(), prog: []string{"/bin/sh"}}
	for b.Loop() {
		fd, err := landlockRuleset(sandboxRules(c))
		if err != nil {
			b.Skip(err)
		}
		unix.Close(fd)
	}
}

// BenchmarkSeccompFilter builds the seccomp filter as the bytes the fork
// init sends (installing it is one prctl).
func BenchmarkSeccompFilter(b *testing.B) {
	for b.Loop() {
		if _, err := seccompFilterBytes(); err != nil {
			b.Skip(err)
		}
	}
}
