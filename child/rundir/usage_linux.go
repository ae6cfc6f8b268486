//go:build linux

package rundir

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Usage is what a directory tree holds on disk: the blocks its entries
// occupy (st_blocks × 512, directories and the root included, a file with
// several links once per link) and how many entries it has below the root.
type Usage struct {
	Bytes   int64
	Entries int64
}

// ErrTooLarge is Measure's refusal of a tree with more than its maxEntries
// entries or nested deeper than maxMeasureDepth: the walk stopped there.
var ErrTooLarge = errors.New("rundir: the tree has too many entries or levels to measure")

// maxMeasureDepth bounds the descriptors a walk holds open (one a level).
const maxMeasureDepth = 64

// Measure walks d's tree as a program may have left it, through d's
// descriptor (docs/containment.md §5) and descriptors opened from it, never
// following a symbolic link (a link counts as itself), making each
// directory u+rwx before listing it (as RemoveTree does: a program may hide
// a folder's content behind its mode). It stops with ErrTooLarge past
// maxEntries entries or maxMeasureDepth levels. Entries that vanish during
// the walk are not counted; the result is a sample, not a snapshot, and a
// tree removed already, or a Dir closed (the daemon is done with it),
// measures as empty.
func (d *Dir) Measure(maxEntries int64) (Usage, error) {
	var u Usage
	if d.closed() {
		return u, nil
	}
	fd := -1
	err := d.Do(func(dfd int) (err error) {
		// A descriptor of its own (not a dup, which would share the
		// listing's offset with d's and every later walk's).
		fd, err = unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return u, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return u, &os.PathError{Op: "fstat", Path: d.path, Err: err}
	}
	u.Bytes = st.Blocks * 512
	if st.Nlink == 0 { // removed: nothing in it to count, nothing to list
		unix.Close(fd)
		return u, nil
	}
	return u, measureAt(fd, &u, maxEntries, 1)
}

// measureAt adds the entries of the directory fd (which it closes) to u.
func measureAt(fd int, u *Usage, maxEntries int64, depth int) error {
	dir := os.NewFile(uintptr(fd), "")
	defer dir.Close()
	for {
		names, err := dir.Readdirnames(256)
		for _, name := range names {
			if u.Entries++; u.Entries > maxEntries {
				return ErrTooLarge
			}
			if err := measureEntry(fd, name, u, maxEntries, depth); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// measureEntry adds the entry name of the directory fd, and for a
// directory everything below it, to u.
func measureEntry(fd int, name string, u *Usage, maxEntries int64, depth int) error {
	var st unix.Stat_t
	switch err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err {
	case nil:
	case unix.ENOENT:
		return nil
	default:
		return &os.PathError{Op: "fstatat", Path: name, Err: err}
	}
	u.Bytes += st.Blocks * 512
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	if depth >= maxMeasureDepth {
		return ErrTooLarge
	}
	sub, err := openDir(fd, name)
	switch err {
	case nil:
		return measureAt(sub, u, maxEntries, depth+1)
	case unix.ENOENT, unix.ENOTDIR, unix.ELOOP: // replaced meanwhile
		return nil
	}
	return &os.PathError{Op: "openat", Path: name, Err: err}
}
