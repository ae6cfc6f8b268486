//go:build linux

package rundir

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
)

// Dir is a directory the daemon made, held open from the moment it was
// made (docs/containment.md §5). A program may rename it, or put a link, a
// FIFO or a file at its name: the descriptor still is the directory the
// daemon made, so every operation through it (Do, Dup, Make, Remove) stays in
// that directory whatever its name now leads to. Path is where it was
// made: for the program's environment, the watchdog and messages, never
// for the daemon to open again.
type Dir struct {
	path string
	name string // its name in parent when it was made

	mu     sync.Mutex
	fd     int // the directory; -1 once closed
	parent int // the folder it was made in; -1 once closed
}

// Make creates a directory in parent (an absolute path, or relative to the
// working directory: the daemon's own, never one a program can write) as
// Create does — opaque name, mode 0700, in this process's home in parent,
// registered with the watcher first — and returns it held open.
func Make(parent string) (*Dir, error) {
	parent, err := filepath.Abs(parent)
	if err != nil {
		return nil, err
	}
	h, err := homes.enter(parent)
	if err != nil {
		return nil, err
	}
	if h != nil {
		parent = h.path
	}
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		homes.leave(h)
		return nil, &os.PathError{Op: "open", Path: parent, Err: err}
	}
	d, err := makeAt(pfd, parent)
	if err != nil {
		homes.leave(h)
		return nil, err
	}
	homes.made(d.path, h)
	return d, nil
}

// Make creates a directory inside d, through d's descriptor, as the
// package-level Make does.
func (d *Dir) Make() (*Dir, error) {
	pfd, err := d.Dup()
	if err != nil {
		return nil, err
	}
	return makeAt(pfd, d.path)
}

// makeAt makes the directory in pfd (whose path is parent), taking pfd.
func makeAt(pfd int, parent string) (*Dir, error) {
	for try := 1; ; try++ {
		name := opaqueName()
		path := filepath.Join(parent, name)
		spawn.WatchDir(path)
		err := unix.Mkdirat(pfd, name, 0o700)
		if err == nil {
			fd, oerr := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if oerr == nil {
				if oerr = unix.Fchmod(fd, 0o700); oerr == nil { // the umask may have taken bits away
					return &Dir{path: path, name: name, fd: fd, parent: pfd}, nil
				}
				unix.Close(fd)
			}
			removeAt(pfd, name)
			err = oerr
		}
		spawn.UnwatchDir(path) // the name is this attempt's alone (random)
		if err != unix.EEXIST || try == maxCreateTries {
			unix.Close(pfd)
			return nil, &os.PathError{Op: "mkdir", Path: path, Err: err}
		}
	}
}

// Path is where d was made.
func (d *Dir) Path() string { return d.path }

// Do calls f with d's descriptor, which stays open until f returns; it
// fails with EBADF once d is closed (or for a nil d). f must not keep the
// descriptor.
func (d *Dir) Do(f func(fd int) error) error {
	if d == nil {
		return &os.PathError{Op: "use", Path: "", Err: unix.EBADF}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return &os.PathError{Op: "use", Path: d.path, Err: unix.EBADF}
	}
	return f(d.fd)
}

// closed reports whether d is nil or closed.
func (d *Dir) closed() bool {
	if d == nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fd < 0
}

// Dup returns a new descriptor of d (close-on-exec) for the caller to own,
// or -1 and the error.
func (d *Dir) Dup() (fd int, err error) {
	fd = -1
	err = d.Do(func(dfd int) error {
		fd, err = unix.FcntlInt(uintptr(dfd), unix.F_DUPFD_CLOEXEC, 0)
		return err
	})
	return fd, err
}

// Remove removes d and everything in it through its descriptor, never
// following a link: its entries first (as RemoveTree does), then d itself,
// from the folder it was made in when it is still there, else from the
// folder it was renamed into (found through "..", matched by inode) — and
// whatever the program put at d's name is removed as RemoveTree removes an
// entry, as a link, never followed. It unregisters d from the watcher once
// the directory is gone. d stays open (Remove may be called again, after a
// late writer); Close closes it. Removing a directory already gone, or a
// closed or nil Dir, succeeds and does nothing more.
func (d *Dir) Remove() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil // closed: removed by whoever closed it, or left to the watcher
	}
	pause := 10 * time.Millisecond
	for pass := 1; ; pass++ {
		err := d.removeOnce()
		if err == nil {
			spawn.UnwatchDir(d.path)
			homes.removed(d.path) // with the last directory of a home, the home
			return nil
		}
		if pass == removePasses || !errors.Is(err, unix.ENOTEMPTY) {
			return wrapPath(err, d.path)
		}
		time.Sleep(pause)
		pause *= 2
	}
}

// removeOnce is one pass of Remove.
func (d *Dir) removeOnce() error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: ".", Err: err}
	}
	if st.Nlink == 0 { // removed already
		return removeAt(d.parent, d.name)
	}
	if st.Mode&0o700 != 0o700 {
		unix.Fchmod(d.fd, st.Mode&0o7777|0o700) // a failure shows as the listing's
	}
	if err := emptyFD(d.fd, "."); err != nil {
		return err
	}
	if err := d.unlinkSelf(&st); err != nil {
		return err
	}
	// What the program left at d's name (a link, a FIFO, a file, a folder).
	return removeAt(d.parent, d.name)
}

// unlinkSelf removes the (empty) directory d from the folder that holds it
// now: d's parent when the name still leads to it, else its ".." (a program
// renamed it), where the entry with d's inode is looked up.
func (d *Dir) unlinkSelf(st *unix.Stat_t) error {
	if sameEntry(d.parent, d.name, st) {
		return rmdirAt(d.parent, d.name)
	}
	up, err := unix.Openat(d.fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "openat", Path: "..", Err: err}
	}
	defer unix.Close(up)
	names, err := listAt(up)
	if err != nil {
		return err
	}
	for _, n := range names {
		if sameEntry(up, n, st) {
			return rmdirAt(up, n)
		}
	}
	return nil // unlinked meanwhile
}

// sameEntry reports whether the entry name of dirfd is the directory st
// describes (not following a link).
func sameEntry(dirfd int, name string, st *unix.Stat_t) bool {
	var e unix.Stat_t
	return unix.Fstatat(dirfd, name, &e, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		e.Dev == st.Dev && e.Ino == st.Ino && e.Mode&unix.S_IFMT == unix.S_IFDIR
}

func rmdirAt(dirfd int, name string) error {
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return &os.PathError{Op: "rmdir", Path: name, Err: err}
	}
	return nil
}

// Close closes d's descriptors (again, or for a nil d: nothing); the
// directory stays.
func (d *Dir) Close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, fd := range []*int{&d.fd, &d.parent} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// RemoveAt removes the entry name of the directory dirfd as RemoveTree
// removes a path: a link as a link, a folder with everything in it, never
// following a link.
func RemoveAt(dirfd int, name string) error { return removeAt(dirfd, name) }

// OpenDirAt opens the folder name of dirfd for reading, refusing a link
// (O_NOFOLLOW) and anything that is not a folder, without blocking.
func OpenDirAt(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
}

// Entry is what LstatAt says of a directory entry.
type Entry struct {
	Dev, Ino uint64
	Mode     uint32 // type and permission bits (S_IFMT …)
	Size     int64
}

// IsDir and IsRegular report the entry's type.
func (e Entry) IsDir() bool     { return e.Mode&unix.S_IFMT == unix.S_IFDIR }
func (e Entry) IsRegular() bool { return e.Mode&unix.S_IFMT == unix.S_IFREG }

// LstatAt describes the entry name of the directory dirfd, or the file fd
// itself when name is "" — never following a link.
func LstatAt(dirfd int, name string) (Entry, error) {
	var st unix.Stat_t
	var err error
	if name == "" {
		err = unix.Fstat(dirfd, &st)
	} else {
		err = unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	return Entry{Dev: st.Dev, Ino: st.Ino, Mode: st.Mode, Size: st.Size}, err
}

// Same reports whether e and f are the same file.
func (e Entry) Same(f Entry) bool { return e.Dev == f.Dev && e.Ino == f.Ino }
