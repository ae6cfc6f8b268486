//go:build linux

package rundir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestHiddenLongMapsLine (C1312): a program cannot end the daemon's read of
// its maps early with a line longer than the reader's buffer (a file mapped
// from deep in directories whose names are newlines, each escaped to four
// bytes), mapped below an unlinked file it hides: the scan stops with
// ErrTooLarge instead of counting nothing.
func TestHiddenLongMapsLine(t *testing.T) {
	leakcheck.Check(t)
	began := time.Now().Add(-time.Second)
	d, err := Make(t.TempDir())
	must(t, err)
	defer d.Close()
	defer d.Remove()
	hidden := hideFile(t, filepath.Join(d.Path(), "hidden"), 1<<20)
	m, err := unix.Mmap(int(hidden.Fd()), 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
	must(t, err)
	defer unix.Munmap(m)
	hidden.Close()

	deep, err := unix.Open(t.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	name := strings.Repeat("\n", 255)
	for range 70 { // 70 × 1 020 escaped bytes: past 64 KiB
		must(t, unix.Mkdirat(deep, name, 0o700))
		next, err := unix.Openat(deep, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(deep)
		must(t, err)
		deep = next
	}
	fd, err := unix.Openat(deep, "f", unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	unix.Close(deep)
	must(t, err)
	defer unix.Close(fd)
	must(t, unix.Ftruncate(fd, 4096))
	// Below the hidden file's mapping (maps lists by address): fixed, at a low free address.
	const low = 0x10000000
	if _, _, errno := unix.Syscall6(unix.SYS_MMAP, low, 4096, unix.PROT_READ,
		unix.MAP_SHARED|unix.MAP_FIXED_NOREPLACE, uintptr(fd), 0); errno != 0 {
		t.Fatalf("mmap at %#x: %v", low, errno)
	}
	defer unix.Syscall(unix.SYS_MUNMAP, low, 4096, 0)

	n, err := d.Hidden([]int{os.Getpid()}, began, 100000)
	if n < 1<<20 && !errors.Is(err, ErrTooLarge) {
		t.Errorf("Hidden = %d, %v; want the 1 MiB unlinked file counted, or ErrTooLarge", n, err)
	}
}
