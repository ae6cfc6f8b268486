//go:build linux

package rundir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// TestMeasure: Measure counts the blocks of every entry below the root
// without following a symbolic link out of the tree, sees into a folder the
// program made unreadable, counts a sparse file by what it occupies, stops
// with ErrTooLarge past its entry or depth bound, and measures a tree that
// is gone as zero.
func TestMeasure(t *testing.T) {
	leakcheck.Check(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "big"), make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "a", "b", "one"), make([]byte, 1<<20), 0o600))
	must(t, os.Symlink(outside, filepath.Join(dir, "link")))
	sparse, err := os.Create(filepath.Join(dir, "sparse"))
	must(t, err)
	must(t, sparse.Truncate(1<<30))
	sparse.Close()
	must(t, os.Chmod(filepath.Join(dir, "a"), 0))
	u, err := Measure(dir, 100)
	if err != nil || u.Entries != 5 || u.Bytes < 1<<20 || u.Bytes > 2<<20 {
		t.Errorf("Measure = %+v, %v; want 5 entries and 1 MiB and a little", u, err)
	}
	if _, err := Measure(dir, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Measure past 4 entries: %v, want ErrTooLarge", err)
	}
	deep := t.TempDir()
	path := deep
	for i := range maxMeasureDepth + 1 {
		path = filepath.Join(path, strconv.Itoa(i))
	}
	must(t, os.MkdirAll(path, 0o700))
	if _, err := Measure(deep, 1000); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Measure past %d levels: %v, want ErrTooLarge", maxMeasureDepth, err)
	}
	if u, err := Measure(filepath.Join(dir, "gone"), 10); err != nil || u != (Usage{}) {
		t.Errorf("Measure of a tree that is gone = %+v, %v", u, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
