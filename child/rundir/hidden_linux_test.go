//go:build linux

package rundir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// TestHidden: Hidden finds, through this process's descriptors and
// mappings, a file of the directory's file system that was unlinked while
// open and one that is only mapped, counts each once, ignores files still
// linked or made before the time it is given, and stops with ErrTooLarge past its bound.
func TestHidden(t *testing.T) {
	leakcheck.Check(t)
	began := time.Now().Add(-time.Second) // birth times are coarser than the clock
	d, err := Make(t.TempDir())
	must(t, err)
	defer d.Close()
	defer d.Remove()
	open := hideFile(t, filepath.Join(d.Path(), "open"), 1<<20)
	defer open.Close()
	mapped := hideFile(t, filepath.Join(d.Path(), "mapped"), 2<<20)
	m, err := unix.Mmap(int(mapped.Fd()), 0, 2<<20, unix.PROT_READ, unix.MAP_SHARED)
	must(t, err)
	defer unix.Munmap(m)
	mapped.Close()
	linked, err := os.Create(filepath.Join(d.Path(), "linked"))
	must(t, err)
	defer linked.Close()
	must(t, linked.Truncate(1<<20))

	n, err := d.Hidden([]int{os.Getpid(), os.Getpid()}, began, 100000)
	if err != nil || n < 3<<20 || n > 4<<20 {
		t.Errorf("Hidden = %d, %v; want the two unlinked files, 3 MiB", n, err)
	}
	if n, err := d.Hidden([]int{os.Getpid()}, time.Now().Add(time.Hour), 100000); n != 0 || err != nil {
		t.Errorf("Hidden of files made before since = %d, %v; want 0 (the file system keeps birth times)", n, err)
	}
	if _, err := d.Hidden([]int{os.Getpid()}, began, 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Hidden over its bound: %v, want ErrTooLarge", err)
	}
}

// hideFile makes path of size bytes written out, unlinks it and returns it
// open.
func hideFile(t *testing.T, path string, size int) *os.File {
	t.Helper()
	f, err := os.Create(path)
	must(t, err)
	_, err = f.Write(make([]byte, size))
	must(t, err)
	must(t, f.Sync())
	must(t, os.Remove(path))
	return f
}

// FuzzParseMapsLine: no line of /proc/<pid>/maps, however malformed, makes
// the parser panic or report a mapping that ends before it starts.
func FuzzParseMapsLine(f *testing.F) {
	f.Add([]byte("7f0000000000-7f0000200000 r--s 00000000 fd:01 1234 /tmp/x (deleted)"))
	f.Add([]byte("00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/dbus-daemon"))
	f.Add([]byte("7ffd-7ffc rw-p 0 00:00 0 [stack]"))
	f.Fuzz(func(t *testing.T, line []byte) {
		if m, ok := parseMapsLine(line); ok && m.end < m.start {
			t.Errorf("%q parsed as %+v", line, m)
		}
	})
}

// TestBorn: a directory's birth time is when Make made it (file times lag
// the clock by up to a tick), and a closed Dir has none.
func TestBorn(t *testing.T) {
	leakcheck.Check(t)
	before := time.Now().Add(-time.Second)
	d, err := Make(t.TempDir())
	must(t, err)
	defer d.Remove()
	born, ok := d.Born()
	if !ok {
		d.Close()
		t.Skip("this file system keeps no birth times")
	}
	if born.Before(before) || born.After(time.Now()) {
		t.Errorf("Born = %v, want between %v and now", born, before)
	}
	d.Close()
	if _, ok := d.Born(); ok {
		t.Error("a closed Dir has a birth time")
	}
}

// TestHiddenSkipsLinkedFileNamedDeleted (C1311): a program cannot make a
// file it keeps linked pass for an unlinked one by naming it "x (deleted)":
// the maps line looks deleted, but a root daemon reads its link count
// through map_files and leaves it to the directory walk.
func TestHiddenSkipsLinkedFileNamedDeleted(t *testing.T) {
	leakcheck.Check(t)
	if os.Geteuid() != 0 {
		t.Skip("map_files is shown to root only; otherwise the mapped bytes count")
	}
	began := time.Now().Add(-time.Second)
	d, err := Make(t.TempDir())
	must(t, err)
	defer d.Close()
	defer d.Remove()
	f, err := os.Create(filepath.Join(d.Path(), "x (deleted)"))
	must(t, err)
	_, err = f.Write(make([]byte, 1<<20)) // blocks, not a hole: counted, it would show
	must(t, err)
	m, err := unix.Mmap(int(f.Fd()), 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
	must(t, err)
	defer unix.Munmap(m)
	f.Close()
	if n, err := d.Hidden([]int{os.Getpid()}, began, 100000); n != 0 || err != nil {
		t.Errorf("Hidden of a linked file named like a deleted one = %d, %v; want 0", n, err)
	}
}
