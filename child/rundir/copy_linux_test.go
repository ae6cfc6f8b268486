//go:build linux

package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

// sourceTree builds a session directory with every kind of entry CopyFD meets.
func sourceTree(t *testing.T) string {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(src, "data.csv"), []byte("a,b\n1,2\n"), 0o640))
	must(os.MkdirAll(filepath.Join(src, "sub", "deeper"), 0o755))
	must(os.Mkdir(filepath.Join(src, "out"), 0o700)) // empty, as every run directory's out/
	must(os.WriteFile(filepath.Join(src, "sub", "deeper", "x.bin"), make([]byte, 5000), 0o600))
	must(os.Symlink("/etc/passwd", filepath.Join(src, "link")))
	must(os.Symlink("/etc", filepath.Join(src, "sub", "dirlink")))
	must(unix.Mkfifo(filepath.Join(src, "fifo"), 0o600))
	must(os.Mkdir(filepath.Join(src, "locked"), 0o700))
	must(os.WriteFile(filepath.Join(src, "locked", "in"), []byte("kept"), 0o600))
	must(os.Chmod(filepath.Join(src, "locked"), 0o000))
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "locked"), 0o700) })
	return src
}

func listTree(t *testing.T, root string) []string {
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel+":"+d.Type().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// copyTo makes a directory in parent and copies the tree at src into it
// through both descriptors; on error the directory is removed.
func copyTo(src, parent string, maxBytes int64) (*Dir, error) {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(sfd)
	d, err := Make(parent)
	if err != nil {
		return nil, err
	}
	if err := d.Do(func(dfd int) error { return CopyFD(sfd, dfd, maxBytes) }); err != nil {
		d.Remove()
		d.Close()
		return nil, err
	}
	return d, nil
}

func TestCopyRegularFilesAndDirectoriesOnly(t *testing.T) {
	leakcheck.Check(t)
	src, parent := sourceTree(t), t.TempDir()
	d, err := copyTo(src, parent, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	defer d.Remove()
	dir := d.Path()
	if filepath.Dir(filepath.Dir(dir)) != parent || !mine(dirEntry(t, dir)) {
		t.Errorf("copy %s is not a registered run directory of %s", dir, parent)
	}
	os.Chmod(filepath.Join(dir, "locked"), 0o700)
	want := []string{".:d---------", "data.csv:----------", "locked:d---------", "locked/in:----------",
		"out:d---------", "sub:d---------", "sub/deeper:d---------", "sub/deeper/x.bin:----------"}
	if got := listTree(t, dir); !slices.Equal(got, want) {
		t.Errorf("copied tree = %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data.csv")); string(b) != "a,b\n1,2\n" {
		t.Errorf("data.csv = %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "data.csv")); fi.Mode().Perm() != 0o640 {
		t.Errorf("data.csv mode = %v, want 0640", fi.Mode().Perm())
	}
}

func TestCopyOverBudgetLeavesNothing(t *testing.T) {
	leakcheck.Check(t)
	src, parent := sourceTree(t), t.TempDir()
	if _, err := copyTo(src, parent, 4000); !errors.Is(err, ErrCopyTooLarge) {
		t.Fatalf("CopyFD over budget: %v, want ErrCopyTooLarge", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("a failed copy left %v", entries)
	}
	if _, err := copyTo(filepath.Join(src, "link"), parent, 1<<20); err == nil {
		t.Errorf("copying from a non-directory succeeded")
	}
}

func dirEntry(t *testing.T, dir string) os.DirEntry {
	entries, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == filepath.Base(dir) {
			return e
		}
	}
	t.Fatalf("%s not found", dir)
	return nil
}

// TestCopyHardLinksCountOncePerName (C1310): a program that links one file
// under many names cannot make a session's fork copy more than the budget:
// every name is copied as a file of its own and spends its size.
func TestCopyHardLinksCountOncePerName(t *testing.T) {
	leakcheck.Check(t)
	src, parent := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(src, "f0"), make([]byte, 1<<20), 0o600))
	for i := 1; i < 8; i++ {
		must(os.Link(filepath.Join(src, "f0"), filepath.Join(src, fmt.Sprintf("f%d", i))))
	}
	if _, err := copyTo(src, parent, 4<<20); !errors.Is(err, ErrCopyTooLarge) {
		t.Fatalf("copying 8 names of one 1 MiB file under 4 MiB: %v, want ErrCopyTooLarge", err)
	}
	d, err := copyTo(src, parent, 8<<20)
	must(err)
	defer d.Close()
	defer d.Remove()
	var st unix.Stat_t
	must(unix.Stat(filepath.Join(d.Path(), "f7"), &st))
	if st.Nlink != 1 || st.Size != 1<<20 {
		t.Errorf("copied f7: %d links, %d bytes; want a file of its own of 1 MiB", st.Nlink, st.Size)
	}
}
