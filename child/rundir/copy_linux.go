//go:build linux

package rundir

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Bounds of CopyFD beyond its byte budget: entries (files, directories and
// skipped entries) and directory depth, so that neither a tree of empty
// files nor a deep chain of directories costs unbounded time or descriptors.
const (
	copyMaxEntries = 100000
	copyMaxDepth   = 64
)

// ErrCopyTooLarge is returned by CopyFD when the tree exceeds its bounds.
var ErrCopyTooLarge = errors.New("rundir: the directory is too large to copy")

// CopyFD copies the tree under srcfd into dstfd, an empty directory, both
// held open by the caller (Dir.Do), whatever the names of either now lead
// to: a session's fork (docs/child-protocol-sessions.md §6.3). Only directories and
// regular files are copied, with their permission bits (plus owner rwx on
// directories and rw on files); symbolic links, devices, sockets and FIFOs
// are skipped. A link is never followed: every entry is opened relative to
// its parent's descriptor with O_NOFOLLOW. The regular files' bytes may
// total maxBytes at most, and the tree may hold 100000 entries and 64
// levels; past that it fails with ErrCopyTooLarge. On error dstfd holds a
// partial copy, for the caller to remove.
func CopyFD(srcfd, dstfd int, maxBytes int64) error {
	c := copier{bytesLeft: maxBytes, entriesLeft: copyMaxEntries}
	return c.tree(srcfd, dstfd, copyMaxDepth)
}

// copier carries CopyFD's remaining budgets.
type copier struct {
	bytesLeft   int64
	entriesLeft int
}

// tree copies the entries of the directory srcfd into dstfd.
func (c *copier) tree(srcfd, dstfd, depth int) error {
	if depth == 0 {
		return ErrCopyTooLarge
	}
	names, err := listAt(srcfd)
	if err != nil {
		return err
	}
	for _, name := range names {
		if c.entriesLeft--; c.entriesLeft < 0 {
			return ErrCopyTooLarge
		}
		var st unix.Stat_t
		if err := unix.Fstatat(srcfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue
			}
			return &os.PathError{Op: "fstatat", Path: name, Err: err}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			err = c.dir(srcfd, dstfd, name, st.Mode&0o7777|0o700, depth)
		case unix.S_IFREG:
			err = c.file(srcfd, dstfd, name, st.Mode&0o7777|0o600)
		}
		if err != nil {
			return wrapPath(err, name)
		}
	}
	return nil
}

// listAt lists the directory fd (a duplicate is read, fd stays open).
func listAt(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: ".", Err: err}
	}
	d := os.NewFile(uintptr(dup), ".")
	defer d.Close()
	names, err := d.Readdirnames(copyMaxEntries + 1)
	if err == io.EOF { // an empty directory
		return nil, nil
	}
	return names, err
}

func (c *copier) dir(srcfd, dstfd int, name string, mode uint32, depth int) error {
	if err := unix.Mkdirat(dstfd, name, 0o700); err != nil {
		return &os.PathError{Op: "mkdirat", Path: name, Err: err}
	}
	sub, err := openDir(srcfd, name)
	if err != nil {
		return &os.PathError{Op: "openat", Path: name, Err: err}
	}
	defer unix.Close(sub)
	dsub, err := unix.Openat(dstfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "openat", Path: name, Err: err}
	}
	defer unix.Close(dsub)
	if err := c.tree(sub, dsub, depth-1); err != nil {
		return err
	}
	return unix.Fchmod(dsub, mode)
}

func (c *copier) file(srcfd, dstfd int, name string, mode uint32) error {
	// O_NONBLOCK: an entry swapped for a FIFO since the stat must not block the open.
	in, err := unix.Openat(srcfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "openat", Path: name, Err: err}
	}
	inf := os.NewFile(uintptr(in), name)
	defer inf.Close()
	var st unix.Stat_t
	if err := unix.Fstat(in, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil // gone, or no longer a regular file: skipped
	}
	if c.bytesLeft -= st.Size; c.bytesLeft < 0 {
		return ErrCopyTooLarge
	}
	out, err := unix.Openat(dstfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return &os.PathError{Op: "openat", Path: name, Err: err}
	}
	outf := os.NewFile(uintptr(out), name)
	// At most the size seen: a file that grows meanwhile is copied as it was.
	_, err = io.CopyN(outf, inf, st.Size)
	if cerr := outf.Close(); err == nil || err == io.EOF {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", name, err)
	}
	return nil
}
