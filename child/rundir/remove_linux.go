//go:build linux

package rundir

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// removePasses bounds RemoveTree's passes: a pass fails with ENOTEMPTY when
// an entry appears meanwhile (a process that was just killed finishing a
// system call), and the next one, a little later, removes it.
const removePasses = 5

// RemoveTree removes path and everything below it, as the daemon's own
// directories need: it never follows a symbolic link (a link is removed as
// a link, wherever it points; directories are opened with O_NOFOLLOW relative
// to their parent's descriptor), makes each directory u+rwx before listing
// it (a program may leave read-only folders behind), and unlinks files
// whatever still holds them open. A path already gone is no error.
func RemoveTree(path string) error {
	parent, name := filepath.Split(filepath.Clean(path))
	if name == "" || name == "." || name == ".." || name == string(filepath.Separator) {
		return &os.PathError{Op: "remove", Path: path, Err: unix.EINVAL}
	}
	if parent == "" {
		parent = "."
	}
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return &os.PathError{Op: "open", Path: parent, Err: err}
	}
	defer unix.Close(pfd)
	pause := 10 * time.Millisecond
	for pass := 1; ; pass++ {
		err := removeAt(pfd, name)
		if err == nil || pass == removePasses || !errors.Is(err, unix.ENOTEMPTY) {
			return wrapPath(err, path)
		}
		time.Sleep(pause)
		pause *= 2
	}
}

// removeAt removes the entry name of the directory dirfd and, for a
// directory, everything below it.
func removeAt(dirfd int, name string) error {
	switch err := unix.Unlinkat(dirfd, name, 0); err {
	case nil, unix.ENOENT:
		return nil
	case unix.EISDIR: // a directory (Linux's answer to unlink)
	default:
		return &os.PathError{Op: "unlinkat", Path: name, Err: err}
	}
	if err := emptyAt(dirfd, name); err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return &os.PathError{Op: "rmdir", Path: name, Err: err}
	}
	return nil
}

// emptyAt removes everything in the directory name of dirfd, never leaving
// it through a symbolic link.
func emptyAt(dirfd int, name string) error {
	fd, err := openDir(dirfd, name)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "openat", Path: name, Err: err}
	}
	defer unix.Close(fd)
	return emptyFD(fd, name)
}

// emptyFD removes everything in the directory fd (named name in errors),
// never leaving it through a symbolic link; fd stays open.
func emptyFD(fd int, name string) error {
	lfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "openat", Path: name, Err: err}
	}
	dir := os.NewFile(uintptr(lfd), name)
	defer dir.Close()
	for {
		names, err := dir.Readdirnames(1024)
		if len(names) == 0 {
			if err == io.EOF {
				return nil
			}
			return err
		}
		for _, n := range names {
			if err := removeAt(fd, n); err != nil {
				return wrapPath(err, name)
			}
		}
		// Start over: entries may have moved under the directory's offset.
		if _, err := dir.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
}

// openDir opens the directory name of dirfd for listing, refusing a symbolic
// link, after granting its owner rwx on it: first as an O_PATH descriptor,
// which needs no permission on the directory, and chmod through its
// /proc/self/fd link, which names the directory itself.
func openDir(dirfd int, name string) (int, error) {
	const flags = unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	pfd, err := unix.Openat(dirfd, name, unix.O_PATH|flags, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err == nil && st.Mode&0o700 != 0o700 {
		// A failure (not its owner) shows as the listing's or an unlink's.
		unix.Chmod("/proc/self/fd/"+strconv.Itoa(pfd), st.Mode&0o7777|0o700)
	}
	return unix.Openat(pfd, ".", unix.O_RDONLY|flags, 0)
}

// wrapPath prefixes a relative path in err with dir.
func wrapPath(err error, dir string) error {
	var pe *os.PathError
	if errors.As(err, &pe) && !filepath.IsAbs(pe.Path) {
		return &os.PathError{Op: pe.Op, Path: filepath.Join(dir, pe.Path), Err: pe.Err}
	}
	return err
}
