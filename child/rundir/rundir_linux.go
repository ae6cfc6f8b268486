//go:build linux

package rundir

import (
	"encoding/base32"
	"encoding/binary"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
)

// Prefix starts the name of every directory the daemon creates. The watchdog
// and the sweep remove nothing else.
const Prefix = "coderun-"

// owner identifies a daemon: who may remove its directories, and when.
type owner struct {
	pid   int
	start uint64 // /proc/<pid>/stat field 22
	pidns uint64 // inode of /proc/<pid>/ns/pid: a pid means nothing across namespaces
}

// self is this process as an owner; ok is false when /proc cannot say (the
// directory then carries no owner, and no sweep ever removes it).
var self = sync.OnceValues(func() (owner, bool) {
	pid := os.Getpid()
	start, ok := spawn.StartTime(pid)
	if !ok {
		return owner{}, false
	}
	ns, ok := pidNamespace("self")
	return owner{pid: pid, start: start, pidns: ns}, ok
})

// record is the owner record's content: "<pid> <start> <pidns>\n".
func (o owner) record() []byte {
	return []byte(strconv.Itoa(o.pid) + " " + strconv.FormatUint(o.start, 10) + " " +
		strconv.FormatUint(o.pidns, 10) + "\n")
}

// parseOwner reads an owner record; ok is false for anything but exactly
// three decimal numbers separated by single spaces and ended by a newline,
// the first a possible pid.
func parseOwner(record string) (o owner, ok bool) {
	rest, found := strings.CutSuffix(record, "\n")
	fields := strings.Split(rest, " ")
	if !found || len(fields) != 3 {
		return owner{}, false
	}
	var n [3]uint64
	for i := range n {
		if n[i], ok = spawn.Decimal(fields[i]); !ok {
			return owner{}, false
		}
	}
	if n[0] == 0 || n[0] > 1<<22 {
		return owner{}, false
	}
	return owner{pid: int(n[0]), start: n[1], pidns: n[2]}, true
}

// pidNamespace returns the inode of /proc/<pid>/ns/pid ("pid:[<inode>]").
func pidNamespace(pid string) (uint64, bool) {
	link, err := os.Readlink("/proc/" + pid + "/ns/pid")
	if err != nil {
		return 0, false
	}
	inner, open := strings.CutPrefix(link, "pid:[")
	inner, closed := strings.CutSuffix(inner, "]")
	if !open || !closed {
		return 0, false
	}
	return spawn.Decimal(inner)
}

// Create makes a new directory (mode 0700) with an opaque name (Prefix and
// 130 random bits) and registers it with the watcher, which removes it if
// the daemon dies before Remove does. The registration comes first, so no
// moment exists at which the directory is there and unregistered. parent
// should be absolute; a relative one is made absolute against the working
// directory. The directory is made in this process's home in parent (see
// the package comment), or in parent itself when parent is inside a home
// already (a directory Create made).
func Create(parent string) (string, error) {
	parent, err := filepath.Abs(parent)
	if err != nil {
		return "", err
	}
	h, err := homes.enter(parent)
	if err != nil {
		return "", err
	}
	if h != nil {
		parent = h.path
	}
	for try := 1; ; try++ {
		dir := filepath.Join(parent, opaqueName())
		spawn.WatchDir(dir)
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			if err = os.Chmod(dir, 0o700); err == nil { // the umask may have taken bits away
				homes.made(dir, h)
				return dir, nil
			}
			os.Remove(dir)
		}
		spawn.UnwatchDir(dir) // the name is this attempt's alone (random)
		if !errors.Is(err, fs.ErrExist) || try == maxCreateTries {
			homes.leave(h)
			return "", err
		}
	}
}

// maxCreateTries bounds Create's attempts at a name not taken (by a leftover
// of an earlier boot, or a name another user guessed).
const maxCreateTries = 100

// opaqueName is a directory's name: Prefix and 26 base32 characters of 128
// random bits, which say nothing of this process or of the other
// directories, and which nobody can take in advance. The bits come from
// math/rand/v2's generator (ChaCha8, seeded by the runtime from the
// kernel's entropy), not crypto/rand, whose initialisation would run at
// every start of the lean init's binary, which links this package
// (internal/archtest).
func opaqueName() string {
	var bits [16]byte
	binary.LittleEndian.PutUint64(bits[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(bits[8:], rand.Uint64())
	return Prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(bits[:]))
}

// Remove removes dir as RemoveTree does and, once it is gone, unregisters it
// (and, with the last directory of a home, the home). Removing a directory
// already gone succeeds.
func Remove(dir string) error {
	if err := RemoveTree(dir); err != nil {
		return err
	}
	spawn.UnwatchDir(dir)
	homes.removed(dir)
	return nil
}

// Sweep removes (RemoveTree) every home in parent whose owner record names an
// owner that is gone: no process with its pid, or one with another start
// time. A directory without an owner record, or with an owner in another pid
// namespace (whose pids mean nothing here), is left alone, as is every
// directory of a live daemon and every directory of another user (whose
// processes /proc may hide). It reports how many it removed, and why others
// could not be.
func Sweep(parent string) (removed int, err error) {
	me, ok := self()
	if !ok {
		return 0, errors.New("rundir: this process's start time or pid namespace is unknown; nothing swept")
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), Prefix) || !e.IsDir() || !mine(e) {
			continue
		}
		o, ok := readOwner(parent, e.Name())
		if !ok || o.pidns != me.pidns || !o.gone() {
			continue
		}
		if err := RemoveTree(filepath.Join(parent, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// mine reports whether this process's user owns the entry e.
func mine(e os.DirEntry) bool {
	info, err := e.Info()
	if err != nil {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// gone reports whether o's process has ended (its pid is unused, or reused
// by a process that started at another time).
func (o owner) gone() bool {
	start, ok := spawn.StartTime(o.pid)
	return !ok || start != o.start
}
