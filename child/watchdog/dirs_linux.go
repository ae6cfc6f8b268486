//go:build linux

package watchdog

import (
	"path/filepath"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/child/rundir"
)

// What the watchdog removes when the daemon dies: the directories the daemon
// created (rundir.Create) and has not removed yet.

// validDir reports whether path may be registered: an absolute, clean path
// of at most maxPathLen bytes, without NUL, whose last element starts with
// rundir.Prefix. The watchdog removes nothing else, however wrong a
// registration.
func validDir(path string) bool {
	base := filepath.Base(path)
	return len(path) <= maxPathLen && filepath.IsAbs(path) && filepath.Clean(path) == path &&
		!strings.ContainsRune(path, 0) && strings.HasPrefix(base, rundir.Prefix)
}

// dirSet is a set of registered directories.
type dirSet map[string]struct{}

// removeAll removes every directory of the set (rundir.RemoveTree: no
// symbolic link followed) and returns the failures' errors.
func (s dirSet) removeAll() []error {
	var errs []error
	for dir := range s {
		if err := rundir.RemoveTree(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
