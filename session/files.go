package session

import (
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Files in and out of a run's working directory (docs/protocol-files.md §12).
// Every operation goes through the descriptor the daemon opened when it made
// the directory (worker.wd, rundir.Dir: docs/containment.md §5) and opens
// each path component relative to its parent's descriptor, refusing links
// (O_NOFOLLOW): whatever the program renamed, linked or swapped, nothing
// outside the directory the daemon made is written, removed or read. out/ is
// walked the same way, each folder once, and only regular files are read.
//
// A fresh run gets out/ when its directory is staged (spawnWorker) and its
// files just before the boot frame (Run.startOn). A session reuses its
// directory: before each of its runs it calls resetOut then stageFiles, and
// after it collectOut with that run's outputs budget; an out/ that is an
// empty folder is recognised through the session's held directory (held.go).

// Bounds of the out/ walk: the files a result may list, the entries
// (folders included) looked at, the longest path read (PATH_MAX − 1), the
// deepest folder entered (out/ is depth 1) and the time it may take.
const (
	maxOutFiles   = 10000
	maxOutEntries = 4 * maxOutFiles
	maxOutPathLen = 4095
	maxOutDepth   = 64
)

// outCollectMin is the least time a collection of out/ is given when the
// run's wall deadline is nearer (or past): see collectDeadline.
const outCollectMin = time.Second

// collectDeadline is when a collection of out/ that starts now must end:
// the run's wall deadline (its wall clock started at handoff), so that the
// collection holds the run's slot no longer than its budget, or
// outCollectMin from now if that is later. What is not read by then is not
// returned, and the budget is truncated (docs/protocol-files.md §12.2).
func collectDeadline(handoff time.Time, maxWallMs int64) time.Time {
	return latest(handoff.Add(time.Duration(maxWallMs)*time.Millisecond), time.Now().Add(outCollectMin))
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// errStaging wraps a failure to prepare the working directory.
var errStaging = errors.New("failed to stage run.files")

// stageFiles writes files (validated paths, docs/protocol-files.md §12.1) into
// wd, creating parent folders (0700) and replacing whatever was at a path
// (files 0600). A parent that is not a folder (a link, a file) fails the
// staging. Nothing outside wd is touched.
func stageFiles(wd *rundir.Dir, files []protocol.InputFile) error {
	if len(files) == 0 {
		return nil
	}
	err := wd.Do(func(root int) error {
		for _, f := range files {
			if err := stageFile(root, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return errors.Join(errStaging, err)
	}
	return nil
}

func stageFile(root int, f protocol.InputFile) error {
	parts := strings.Split(f.Path, "/")
	dir, err := mkdirsAt(root, parts[:len(parts)-1])
	if err != nil {
		return err
	}
	if dir != root {
		defer syscall.Close(dir)
	}
	// Replace, never write through: a session's program may have left a
	// FIFO or a link there.
	name := parts[len(parts)-1]
	if err := rundir.RemoveAt(dir, name); err != nil {
		return err
	}
	return writeAt(dir, name, f.Data)
}

// mkdirsAt opens the folders parts under root, one below the other, each
// relative to its parent's descriptor (creating it, 0700, when missing) and
// refusing a link or anything else that is not a folder; it returns the
// last one's descriptor for the caller to close (root itself for none).
func mkdirsAt(root int, parts []string) (int, error) {
	dir := root
	for _, p := range parts {
		next, err := openOrMkdir(dir, p)
		if dir != root {
			syscall.Close(dir)
		}
		if err != nil {
			return -1, &os.PathError{Op: "openat", Path: p, Err: err}
		}
		dir = next
	}
	return dir, nil
}

func openOrMkdir(dirfd int, name string) (int, error) {
	if name == "" || name == "." || name == ".." {
		return -1, syscall.EINVAL
	}
	fd, err := rundir.OpenDirAt(dirfd, name)
	if err == syscall.ENOENT {
		if err = syscall.Mkdirat(dirfd, name, 0o700); err == nil || err == syscall.EEXIST {
			fd, err = rundir.OpenDirAt(dirfd, name)
		}
	}
	return fd, err
}

// resetOut leaves wd with an empty out/ folder (0700), removing whatever the
// program left under that name (a link is removed, never followed). An out/
// that already is an empty 0700 folder is kept: most session runs write
// nothing there, and removing and recreating a folder costs about half a
// millisecond on ext4.
func resetOut(wd *rundir.Dir) error {
	return wd.Do(func(root int) error {
		if empty, plain := outStateAt(root, make([]byte, 1024)); empty && plain {
			return nil
		}
		if err := rundir.RemoveAt(root, protocol.OutDir); err != nil {
			return err
		}
		if err := syscall.Mkdirat(root, protocol.OutDir, 0o700); err != nil {
			return &os.PathError{Op: "mkdirat", Path: protocol.OutDir, Err: err}
		}
		return nil
	})
}

// collectOut returns the regular files under wd's out/, sorted by path,
// each read only if it fits the outputs budget b (which it charges); from the
// first that does not, every file is listed as omitted. Links, FIFOs, sockets
// and devices are skipped and never opened; a file or folder that changed
// type or identity since it was listed is skipped too. A walk that reaches
// maxOutFiles files, maxOutEntries entries or the deadline ends there, and
// one that skips a folder deeper than maxOutDepth goes on without it; either
// truncates the budget. A missing or replaced out/ yields no files.
func collectOut(wd *rundir.Dir, b *outputBudget, deadline time.Time) []protocol.OutFile {
	c := outWalk{b: b, deadline: deadline, buf: make([]byte, 8192)}
	wd.Do(func(root int) error {
		out, err := rundir.OpenDirAt(root, protocol.OutDir)
		if err != nil {
			return nil
		}
		defer syscall.Close(out)
		c.dir(out, protocol.OutDir, 1)
		return nil
	})
	if c.stopped || c.partial {
		b.truncate()
	}
	return c.files
}

// outWalk is one collection of out/: each folder is listed once through its
// own descriptor, opened from its parent's, so the work is linear in the
// entries whatever the depth.
type outWalk struct {
	b        *outputBudget
	deadline time.Time
	buf      []byte // getdents
	files    []protocol.OutFile
	entries  int
	stopped  bool // a bound ended the walk
	partial  bool // a folder was skipped (too deep)
}

// outChild is a folder or regular file found by the walk.
type outChild struct {
	name string
	st   rundir.Entry
}

func (ch *outChild) isDir() bool { return ch.st.IsDir() }

// key orders a folder's children so that a depth-first walk meets files in
// the order of their full paths: a folder sorts as its name and a slash.
func (ch *outChild) key() string {
	if ch.isDir() {
		return ch.name + "/"
	}
	return ch.name
}

// over reports whether the walk must end, ending it at its deadline.
func (c *outWalk) over() bool {
	if !c.stopped && time.Now().After(c.deadline) {
		c.stopped = true
	}
	return c.stopped
}

// dir collects the folder fd, whose path is rel, and every folder below it.
func (c *outWalk) dir(fd int, rel string, depth int) {
	children := c.list(fd)
	slices.SortFunc(children, func(x, y outChild) int { return strings.Compare(x.key(), y.key()) })
	for i := range children {
		ch := &children[i]
		p := rel + "/" + ch.name
		switch {
		case c.over():
			return
		case len(p) > maxOutPathLen:
		case ch.isDir() && depth == maxOutDepth:
			c.partial = true
		case ch.isDir():
			c.sub(fd, ch, p, depth+1)
		case len(c.files) == maxOutFiles:
			c.stopped = true
			return
		default:
			if f, ok := c.read(fd, p, ch); ok {
				c.files = append(c.files, f)
			}
		}
	}
}

// sub collects the folder ch of parent when it still is the folder listed.
func (c *outWalk) sub(parent int, ch *outChild, p string, depth int) {
	fd, err := rundir.OpenDirAt(parent, ch.name)
	if err != nil {
		return
	}
	defer syscall.Close(fd)
	if st, err := rundir.LstatAt(fd, ""); err == nil && st.Same(ch.st) {
		c.dir(fd, p, depth)
	}
}

// list reads the folders and regular files of the folder fd (an lstat of
// each entry, never following a link), counting every entry.
func (c *outWalk) list(fd int) []outChild {
	var out []outChild
	for !c.over() {
		n, err := syscall.Getdents(fd, c.buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return out
		}
		_, _, names := syscall.ParseDirent(c.buf[:n], -1, nil)
		for _, name := range names {
			if c.entries++; c.entries > maxOutEntries {
				c.stopped = true
				return out
			}
			st, err := rundir.LstatAt(fd, name)
			if err == nil && (st.IsDir() || st.IsRegular()) {
				out = append(out, outChild{name: name, st: st})
			}
		}
	}
	return out
}

// read opens the listed file ch of the folder dirfd without blocking (a
// FIFO swapped in stays unread), checks it is still the regular file
// listed, and reads it when its size fits the budget; otherwise it is
// listed as omitted.
func (c *outWalk) read(dirfd int, p string, ch *outChild) (protocol.OutFile, bool) {
	fd, err := syscall.Openat(dirfd, ch.name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return protocol.OutFile{}, false
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	st, err := rundir.LstatAt(fd, "")
	if err != nil || !st.IsRegular() || !st.Same(ch.st) {
		return protocol.OutFile{}, false
	}
	out := protocol.OutFile{Path: p, Size: st.Size}
	if !c.b.take(st.Size) {
		out.Omitted = true
		return out, true
	}
	data := make([]byte, st.Size)
	n, _ := io.ReadFull(f, data) // a file that shrank meanwhile: what is there
	out.Data, out.Size = data[:n], int64(n)
	return out, true
}
