//go:build linux

package rundir

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A file a program unlinks while it keeps it open, makes with O_TMPFILE, or
// maps, closes and unlinks still holds its blocks, but no directory lists
// it: Measure cannot see it. Hidden finds such files through the processes
// that hold them, in /proc: their descriptors (/proc/<pid>/fd) and their
// mappings (/proc/<pid>/maps, sized through /proc/<pid>/map_files, which
// the kernel shows to a root daemon only; otherwise a mapping counts the
// bytes it maps, a lower bound of its file's size).

// Held maps each inode to its blocks' bytes, for the unlinked files Hidden
// finds.
type Held map[uint64]int64

// Bytes adds up the files of h that are not in old.
func (h Held) Bytes(old Held) int64 {
	var n int64
	for ino, b := range h {
		if _, ok := old[ino]; !ok {
			n += b
		}
	}
	return n
}

// Hidden finds the files on d's file system that no directory links and
// that one of pids holds open or mapped. It stops with
// ErrTooLarge past maxEntries descriptors and mappings looked at, so that a
// program cannot make the daemon's sampling arbitrarily long. A process
// that is gone, or whose entries the daemon may not read, counts nothing.
func (d *Dir) Hidden(pids []int, maxEntries int64) (Held, error) {
	var st unix.Stat_t
	if d.closed() || d.Do(func(fd int) error { return unix.Fstat(fd, &st) }) != nil {
		return nil, nil
	}
	h := hiddenScan{dev: st.Dev, held: Held{}, budget: maxEntries}
	for _, pid := range pids {
		proc := "/proc/" + strconv.Itoa(pid)
		if err := h.descriptors(proc); err != nil {
			return h.held, err
		}
		if err := h.mappings(proc); err != nil {
			return h.held, err
		}
	}
	return h.held, nil
}

// hiddenScan is one Hidden pass: the file system sought, the files found
// and the entries it may still look at.
type hiddenScan struct {
	dev    uint64
	held   Held
	budget int64
}

// spend takes n entries from the scan's budget.
func (h *hiddenScan) spend(n int64) error {
	if h.budget -= n; h.budget < 0 {
		return ErrTooLarge
	}
	return nil
}

// count adds the file st describes when it is an unlinked regular file on
// the scan's file system not counted yet.
func (h *hiddenScan) count(st *unix.Stat_t) {
	if st.Dev == h.dev && st.Nlink == 0 && st.Mode&unix.S_IFMT == unix.S_IFREG {
		h.held[st.Ino] = st.Blocks * 512
	}
}

// descriptors counts what proc's open descriptors hold.
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
		var st unix.Stat_t
		// Following the magic link stats the open file itself.
		if unix.Fstatat(int(dir.Fd()), name, &st, 0) == nil {
			h.count(&st)
		}
	}
	return nil
}

// mappings counts what proc's mappings of deleted files hold.
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
		m, ok := parseMapsLine(sc.Bytes())
		if !ok || !m.deleted || unix.Mkdev(m.major, m.minor) != h.dev {
			continue
		}
		if _, counted := h.held[m.ino]; counted {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(proc+"/map_files/"+m.span, &st) == nil {
			h.count(&st)
			continue
		}
		// Not root: the mapped length, the least its file holds.
		h.held[m.ino] = int64(m.end - m.start)
	}
	return nil
}

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
	m.deleted = m.ino != 0 && bytes.HasSuffix(line, []byte(" (deleted)"))
	return m, true
}
