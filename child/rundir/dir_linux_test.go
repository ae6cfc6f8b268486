//go:build linux

package rundir

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

// outsideDir is a directory the tests must leave as it is: a file and a
// folder with a file.
func outsideDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	for _, f := range []string{"keep", "sub/keep"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func outsideKept(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []string{"keep", "sub/keep"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != "keep" {
			t.Errorf("%s outside: %q %v", f, b, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("outside holds %d entries", len(ents))
	}
}

// TestDirSwapped (C642): a held directory whose name a program swapped for
// a link out, a FIFO or a file after renaming the directory (beside it, or
// into a folder elsewhere) is still the directory the daemon made: Do
// works on it, Make makes inside it, and Remove removes it (found through
// "..") and whatever was put at its name, registered and unregistered by
// its made path, never reaching the link's target.
func TestDirSwapped(t *testing.T) {
	leakcheck.Check(t)
	rec := &recorder{}
	if !spawn.SetWatcher(rec) {
		t.Fatal("a watcher is installed already")
	}
	defer spawn.ClearWatcher(rec)
	outside := outsideDir(t)
	swaps := map[string]func(path string) error{
		"symlink": func(p string) error { return os.Symlink(outside, p) },
		"fifo":    func(p string) error { return unix.Mkfifo(p, 0o600) },
		"file":    func(p string) error { return os.WriteFile(p, []byte("x"), 0o600) },
		"folder":  func(p string) error { return os.Mkdir(p, 0o700) },
	}
	for name, swap := range swaps {
		for _, away := range []string{"beside", "elsewhere"} {
			t.Run(name+"/"+away, func(t *testing.T) {
				parent := t.TempDir()
				d, err := Make(parent)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				home := filepath.Dir(d.Path()) // this process's home in parent
				if fi, err := os.Lstat(d.Path()); err != nil || fi.Mode() != os.ModeDir|0o700 || filepath.Dir(home) != parent ||
					!strings.HasPrefix(filepath.Base(d.Path()), Prefix) || !strings.HasPrefix(filepath.Base(home), Prefix) {
					t.Fatalf("Make made %s: %v %v", d.Path(), fi, err)
				}
				inner, err := d.Make()
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(inner.Path(), "data"), []byte("d"), 0o600)
				moved := filepath.Join(home, "moved")
				if away == "elsewhere" {
					os.Mkdir(filepath.Join(parent, "else"), 0o700)
					moved = filepath.Join(parent, "else", "moved")
				}
				if err := os.Rename(d.Path(), moved); err != nil {
					t.Fatal(err)
				}
				if err := swap(d.Path()); err != nil {
					t.Fatal(err)
				}
				err = d.Do(func(fd int) error { return writeFileAt(fd, "through-fd") })
				if _, serr := os.Stat(filepath.Join(moved, "through-fd")); err != nil || serr != nil {
					t.Errorf("Do did not reach the directory made: %v %v", err, serr)
				}
				innerMade, err := d.Make()
				if err != nil || filepath.Dir(innerMade.Path()) != d.Path() {
					t.Fatalf("Make inside: %v", err)
				}
				if _, err := os.Stat(filepath.Join(moved, filepath.Base(innerMade.Path()))); err != nil {
					t.Errorf("Make inside did not reach the directory made: %v", err)
				}
				for _, x := range []*Dir{innerMade, inner, d} {
					if err := x.Remove(); err != nil {
						t.Errorf("Remove %s: %v", x.Path(), err)
					}
					x.Close()
				}
				if ents, _ := os.ReadDir(parent); away == "beside" && len(ents) != 0 || away == "elsewhere" && len(ents) != 1 {
					t.Errorf("left in the parent: %v", ents)
				}
				if _, err := os.Lstat(moved); !os.IsNotExist(err) {
					t.Errorf("the renamed directory is still there: %v", err)
				}
				outsideKept(t, outside)
				for _, x := range []*Dir{innerMade, inner, d} {
					if !slices.Contains(rec.watched, x.Path()) || !slices.Contains(rec.dropped, x.Path()) {
						t.Errorf("%s not registered and unregistered", x.Path())
					}
				}
			})
		}
	}
}

func writeFileAt(dirfd int, name string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// TestDirRemoveTwice: a second Remove after a late writer refilled nothing
// succeeds; Remove and Do on a closed or nil Dir do nothing / fail EBADF.
func TestDirRemoveTwice(t *testing.T) {
	leakcheck.Check(t)
	d, err := Make(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
	d.Close()
	if err := d.Remove(); err != nil {
		t.Errorf("Remove when closed: %v", err)
	}
	if err := d.Do(func(int) error { return nil }); err == nil {
		t.Error("Do on a closed Dir succeeded")
	}
	var nilDir *Dir
	nilDir.Close()
	if nilDir.Remove() != nil || nilDir.Do(func(int) error { return nil }) == nil {
		t.Error("a nil Dir")
	}
}
