//go:build linux

package rundir

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// A file a program unlinks while it keeps it open, makes with O_TMPFILE, or
// maps, closes and unlinks still holds its blocks, but no directory lists
// it: Measure cannot see it. Hidden finds such files through the tasks
// that hold them, in /proc: their descriptors (/proc/<tid>/fd) and their
// mappings (/proc/<tid>/maps, sized through /proc/<tid>/map_files, which
// the kernel shows to a root daemon only; otherwise a mapping counts the
// bytes it maps, a lower bound of its file's size). Every task (thread) is
// looked at, not only a process's first: a thread may have a descriptor
// table of its own (unshare(CLONE_FILES)), and once a process's first
// thread has ended, /proc/<pid> shows neither the descriptors nor the
// mappings its other threads still hold. Tasks that share a table or an
// address space (kcmp) are read once. A file's birth time tells the run's
// files from those an interpreter brought along, so that no scan is needed
// before the program starts.

// Hidden adds up the files on d's file system that no directory links,
// that a task of one of pids holds open or mapped, and that were made at
// or after since (a file the file system gives no birth time counts
// whenever it was made): a library replaced on disk while an interpreter
// from before the run still maps it is not the run's. Each file counts
// once. It stops with ErrTooLarge past maxEntries tasks, descriptors,
// mappings and comparisons looked at, so that a program cannot make the
// daemon's sampling arbitrarily long. A process that is gone, or whose
// entries the daemon may not read, counts nothing.
func (d *Dir) Hidden(pids []int, since time.Time, maxEntries int64) (int64, error) {
	var st unix.Stat_t
	if d.closed() || d.Do(func(fd int) error { return unix.Fstat(fd, &st) }) != nil {
		return 0, nil
	}
	h := hiddenScan{dev: st.Dev, since: since, seen: map[uint64]bool{}, budget: maxEntries}
	for _, pid := range pids {
		if err := h.process("/proc/" + strconv.Itoa(pid)); err != nil {
			return h.bytes, err
		}
	}
	return h.bytes, nil
}

// process counts what the tasks of the process at proc hold. Tasks are
// compared within their process only (its threads; processes that share
// a table through clone(CLONE_FILES) are read once each), so comparing
// costs no more than the square of one process's threads.
func (h *hiddenScan) process(proc string) error {
	dir, err := os.Open(proc + "/task")
	if err != nil {
		return nil
	}
	tids, _ := dir.Readdirnames(-1)
	dir.Close()
	if err := h.spend(int64(len(tids))); err != nil {
		return err
	}
	tables, spaces := sharing{kind: kcmpFiles}, sharing{kind: kcmpVM}
	for _, name := range tids {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		task := "/proc/" + name // a thread's own /proc entry: map_files is there, not under task/
		if first, err := tables.first(h, tid); err != nil {
			return err
		} else if first {
			if err := h.descriptors(task); err != nil {
				return err
			}
		}
		if first, err := spaces.first(h, tid); err != nil {
			return err
		} else if first {
			if err := h.mappings(task); err != nil {
				return err
			}
		}
	}
	return nil
}

// kcmp's types (linux/kcmp.h): what two tasks are compared by.
const (
	kcmpVM    = 1 // the address space
	kcmpFiles = 2 // the descriptor table
)

// sharing is the tasks a scan read one kind of resource of, one task per
// distinct table or address space.
type sharing struct {
	kind int
	tids []int
}

// first reports whether tid's resource is none that s has read yet, and
// records tid if so. Each comparison is spent from h's budget; a kernel
// without kcmp makes every task first (read again, never skipped).
func (s *sharing) first(h *hiddenScan, tid int) (bool, error) {
	for _, known := range s.tids {
		if err := h.spend(1); err != nil {
			return false, err
		}
		r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(known), uintptr(tid), uintptr(s.kind), 0, 0, 0)
		if errno == 0 && r == 0 {
			return false, nil
		}
	}
	s.tids = append(s.tids, tid)
	return true, nil
}

// hiddenScan is one Hidden pass: what it seeks, what it found and the
// entries it may still look at.
type hiddenScan struct {
	dev    uint64
	since  time.Time
	seen   map[uint64]bool // inodes looked at
	bytes  int64
	budget int64
}

// spend takes n entries from the scan's budget.
func (h *hiddenScan) spend(n int64) error {
	if h.budget -= n; h.budget < 0 {
		return ErrTooLarge
	}
	return nil
}

// count adds the file that dirfd and name lead to (following the /proc
// magic link) when it is an unlinked regular file on the scan's file
// system, made since the scan's start, not counted yet. It reports whether
// the daemon could look at the file.
func (h *hiddenScan) count(dirfd int, name string) bool {
	var x unix.Statx_t
	if unix.Statx(dirfd, name, 0, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x) != nil {
		return false
	}
	dev := unix.Mkdev(x.Dev_major, x.Dev_minor)
	if dev != h.dev || x.Nlink != 0 || x.Mode&unix.S_IFMT != unix.S_IFREG || h.seen[x.Ino] {
		return true
	}
	h.seen[x.Ino] = true
	if x.Mask&unix.STATX_BTIME != 0 && time.Unix(x.Btime.Sec, int64(x.Btime.Nsec)).Before(h.since) {
		return true
	}
	h.bytes += int64(x.Blocks) * 512
	return true
}

// descriptors counts what the open descriptors of the task at proc hold.
func (h *hiddenScan) descriptors(proc string) error {
	dir, err := os.Open(proc + "/fd")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	if err := h.spend(int64(len(names))); err != nil {
		return err
	}
	for _, name := range names {
		h.count(int(dir.Fd()), name)
	}
	return nil
}

// mappings counts what the mappings of deleted files of the task at proc
// hold. A line longer than the scanner's 64 KiB ends the scan with
// ErrTooLarge.
func (h *hiddenScan) mappings(proc string) error {
	f, err := os.Open(proc + "/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if err := h.spend(1); err != nil {
			return err
		}
		line := sc.Bytes()
		if !bytes.HasSuffix(line, deletedSuffix) { // most lines: parsed no further
			continue
		}
		m, ok := parseMapsLine(line)
		if !ok || !m.deleted || unix.Mkdev(m.major, m.minor) != h.dev {
			continue
		}
		if h.seen[m.ino] || h.count(unix.AT_FDCWD, proc+"/map_files/"+m.span) {
			continue
		}
		// Not root: the mapped length, the least its file holds, whenever
		// the file was made.
		h.seen[m.ino] = true
		h.bytes += int64(m.end - m.start)
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		// A path deep enough (a newline is shown as four bytes) makes a line
		// longer than the scanner holds; skipped, it would end the read and
		// hide every mapping after it.
		return ErrTooLarge
	}
	return nil
}

// deletedSuffix ends the maps line of a file that has no name any more.
var deletedSuffix = []byte(" (deleted)")

// mapping is one line of /proc/<pid>/maps.
type mapping struct {
	span         string // "start-end", the name of its map_files entry
	start, end   uint64
	major, minor uint32
	ino          uint64
	deleted      bool // the mapped file has no name any more
}

// parseMapsLine reads "start-end perms offset major:minor inode [path]".
func parseMapsLine(line []byte) (mapping, bool) {
	var m mapping
	fields := bytes.Fields(line)
	if len(fields) < 5 {
		return m, false
	}
	start, end, ok := bytes.Cut(fields[0], []byte("-"))
	maj, mnr, ok2 := bytes.Cut(fields[3], []byte(":"))
	if !ok || !ok2 {
		return m, false
	}
	var errs [5]error
	m.span = string(fields[0])
	m.start, errs[0] = strconv.ParseUint(string(start), 16, 64)
	m.end, errs[1] = strconv.ParseUint(string(end), 16, 64)
	major, e2 := strconv.ParseUint(string(maj), 16, 32)
	minor, e3 := strconv.ParseUint(string(mnr), 16, 32)
	errs[2], errs[3] = e2, e3
	m.major, m.minor = uint32(major), uint32(minor)
	m.ino, errs[4] = strconv.ParseUint(string(fields[4]), 10, 64)
	for _, err := range errs {
		if err != nil || m.end < m.start {
			return m, false
		}
	}
	m.deleted = m.ino != 0 && bytes.HasSuffix(line, deletedSuffix)
	return m, true
}

// Born is when d's directory was made, and false where its file system
// keeps no birth times (or d is closed). Everything the daemon stages into
// d, and everything a program makes there, is born after it.
func (d *Dir) Born() (time.Time, bool) {
	var x unix.Statx_t
	if d.closed() || d.Do(func(fd int) error {
		return unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BTIME, &x)
	}) != nil || x.Mask&unix.STATX_BTIME == 0 {
		return time.Time{}, false
	}
	return time.Unix(x.Btime.Sec, int64(x.Btime.Nsec)), true
}
