//go:build linux

package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
)

// A home is this process's directory in a parent: it holds the directories
// Create makes there, and the owner record (ownerFile, read-only) by which
// Sweep knows whose it is. Its name is opaque like theirs and the same for
// the process's whole life, so a program, which sees its working
// directory's full path, learns nothing of the host or of other runs from
// it. In tier sandbox a program may write its own directory only, never
// the home, so it cannot rewrite the record. A home exists while it holds a
// directory: made with the first, removed with the last, so that a quiet
// daemon (or a test's) leaves nothing behind.

// ownerFile is the owner record's name in a home.
const ownerFile = "owner"

type home struct {
	path string
	held int // directories Create made in it that Remove has not removed
}

// homeSet is this process's homes, one a parent.
type homeSet struct {
	mu       sync.Mutex
	byParent map[string]*home
	live     map[string]*home // the directories made in each, not yet removed
}

var homes = &homeSet{byParent: map[string]*home{}, live: map[string]*home{}}

// homeName is the name of every home of this process.
var homeName = sync.OnceValue(opaqueName)

// enter returns parent's home, made if need be, counting in a directory
// about to be made there; nil when parent is inside a home already.
func (s *homeSet) enter(parent string) (*home, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.byParent {
		if strings.HasPrefix(parent, h.path+string(filepath.Separator)) || parent == h.path {
			return nil, nil
		}
	}
	h := s.byParent[parent]
	if h == nil {
		path := filepath.Join(parent, homeName())
		if err := makeHome(path); err != nil {
			return nil, err
		}
		h = &home{path: path}
		s.byParent[parent] = h
	}
	h.held++
	return h, nil
}

// made records dir as made in h (nil: in no home of its own).
func (s *homeSet) made(dir string, h *home) {
	if h == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live[dir] = h
}

// removed counts out dir, if it was made in a home (a second Remove of it
// is not counted).
func (s *homeSet) removed(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.live[dir]; h != nil {
		delete(s.live, dir)
		s.leaveLocked(h)
	}
}

// leave counts out a directory enter counted in that was not made.
func (s *homeSet) leave(h *home) {
	if h == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaveLocked(h)
}

// leaveLocked removes h once it holds nothing; a home that cannot be
// removed stays, and is tried again when it next empties.
func (s *homeSet) leaveLocked(h *home) {
	if h.held--; h.held > 0 {
		return
	}
	if RemoveTree(h.path) != nil {
		return
	}
	spawn.UnwatchDir(h.path)
	for parent, x := range s.byParent {
		if x == h {
			delete(s.byParent, parent)
		}
	}
}

// makeHome makes the home path (0700), registered with the watcher first,
// with this process's owner record in it (none when /proc cannot say who
// this process is: no sweep then ever removes the home). On error nothing
// is left.
func makeHome(path string) error {
	spawn.WatchDir(path)
	err := os.Mkdir(path, 0o700)
	if err == nil {
		if err = os.Chmod(path, 0o700); err == nil { // the umask may have taken bits away
			err = writeOwner(path)
		}
		if err != nil {
			RemoveTree(path)
		}
	}
	if err != nil {
		spawn.UnwatchDir(path)
	}
	return err
}

// writeOwner writes this process's owner record into the home dir.
func writeOwner(dir string) error {
	o, ok := self()
	if !ok {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o400)
	if err != nil {
		return err
	}
	_, err = f.Write(o.record())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// maxRecord bounds the bytes readOwner reads: three decimal numbers of at
// most 20 digits, two spaces and a newline.
const maxRecord = 64

// readOwner reads the owner record of the directory name in parent,
// opening neither through a symbolic link; ok is false when it has none
// that parses.
func readOwner(parent, name string) (o owner, ok bool) {
	const flags = unix.O_NOFOLLOW | unix.O_CLOEXEC
	dir, err := unix.Open(filepath.Join(parent, name), unix.O_RDONLY|unix.O_DIRECTORY|flags, 0)
	if err != nil {
		return owner{}, false
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, ownerFile, unix.O_RDONLY|unix.O_NONBLOCK|flags, 0)
	if err != nil {
		return owner{}, false
	}
	defer unix.Close(fd)
	buf := make([]byte, maxRecord+1)
	n, err := unix.Read(fd, buf)
	if err != nil || n > maxRecord {
		return owner{}, false
	}
	return parseOwner(string(buf[:n]))
}
