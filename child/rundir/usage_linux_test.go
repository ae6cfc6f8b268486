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
	d, err := Make(t.TempDir())
	must(t, err)
	defer d.Close()
	defer d.Remove()
	dir := d.Path()
	must(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "a", "b", "one"), make([]byte, 1<<20), 0o600))
	must(t, os.Symlink(outside, filepath.Join(dir, "link")))
	sparse, err := os.Create(filepath.Join(dir, "sparse"))
	must(t, err)
	must(t, sparse.Truncate(1<<30))
	sparse.Close()
	must(t, os.Chmod(filepath.Join(dir, "a"), 0))
	u, err := d.Measure(100)
	if err != nil || u.Entries != 5 || u.Bytes < 1<<20 || u.Bytes > 2<<20 {
		t.Errorf("Measure = %+v, %v; want 5 entries and 1 MiB and a little", u, err)
	}
	if _, err := d.Measure(4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Measure past 4 entries: %v, want ErrTooLarge", err)
	}
	deep, err := Make(t.TempDir())
	must(t, err)
	defer deep.Close()
	defer deep.Remove()
	path := deep.Path()
	for i := range maxMeasureDepth + 1 {
		path = filepath.Join(path, strconv.Itoa(i))
	}
	must(t, os.MkdirAll(path, 0o700))
	if _, err := deep.Measure(1000); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Measure past %d levels: %v, want ErrTooLarge", maxMeasureDepth, err)
	}
	// Renamed, with a link to a host tree at its name: still its own tree.
	must(t, os.Rename(dir, dir+".moved"))
	must(t, os.Symlink(outside, dir))
	if u, err := d.Measure(100); err != nil || u.Entries != 5 {
		t.Errorf("Measure of a renamed tree = %+v, %v; want its own 5 entries", u, err)
	}
	must(t, os.Remove(dir))
	must(t, d.Remove())
	if u, err := d.Measure(10); err != nil || u.Entries != 0 {
		t.Errorf("Measure of a tree that is gone = %+v, %v", u, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A Dir the daemon closed (its run is over) measures as empty, not as a
// tree the daemon cannot measure.
func TestMeasureClosed(t *testing.T) {
	leakcheck.Check(t)
	d, err := Make(t.TempDir())
	must(t, err)
	defer d.Remove()
	d.Close()
	if u, err := d.Measure(10); err != nil || u != (Usage{}) {
		t.Errorf("Measure of a closed Dir = %+v, %v", u, err)
	}
}
