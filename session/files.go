package session

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Files in and out of a run's working directory (docs/protocol.md §12). Every
// path is opened through an os.Root on the working directory, so nothing
// outside it is ever written or read, whatever links the program left; out/
// is listed without following links and only regular files are read.
//
// A fresh run gets out/ when its directory is staged (spawnWorker) and its
// files just before the boot frame (Run.startOn). A session reuses its
// directory: before each of its runs it calls resetOut then stageFiles, and
// after it collectOut with that run's outputs budget; an out/ that is an
// empty folder is recognised through the session's held directory (held.go).

// Bounds of the out/ listing: the files a result may list, the entries
// (folders included) looked at, and the longest path read (PATH_MAX − 1).
const (
	maxOutFiles   = 10000
	maxOutEntries = 4 * maxOutFiles
	maxOutPathLen = 4095
)

// errStaging wraps a failure to prepare the working directory.
var errStaging = errors.New("failed to stage run.files")

// stageFiles writes files (validated paths, docs/protocol.md §12.1) into
// dir, creating parent folders (0700) and replacing whatever was at a path
// (files 0600). Nothing outside dir is touched.
func stageFiles(dir string, files []protocol.InputFile) error {
	if len(files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return errors.Join(errStaging, err)
	}
	defer root.Close()
	for _, f := range files {
		if err := stageFile(root, f); err != nil {
			return errors.Join(errStaging, err)
		}
	}
	return nil
}

func stageFile(root *os.Root, f protocol.InputFile) error {
	if parent := path.Dir(f.Path); parent != "." {
		if err := root.MkdirAll(parent, 0o700); err != nil {
			return err
		}
	}
	// Replace, never write through: a session's program may have left a
	// FIFO or a link there.
	if err := root.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := root.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = out.Write(f.Data)
	return errors.Join(err, out.Close())
}

// resetOut leaves dir with an empty out/ folder (0700), removing whatever the
// program left under that name (a link is removed, never followed). An out/
// that already is an empty 0700 folder is kept: most session runs write
// nothing there, and removing and recreating a folder costs about half a
// millisecond on ext4.
func resetOut(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if emptyOut(root) {
		return nil
	}
	if err := root.RemoveAll(protocol.OutDir); err != nil {
		return err
	}
	return root.Mkdir(protocol.OutDir, 0o700)
}

// emptyOut reports whether out/ is a folder (not a link to one) with mode
// 0700 exactly and no entries.
func emptyOut(root *os.Root) bool {
	if st, err := root.Lstat(protocol.OutDir); err != nil || st.Mode() != fs.ModeDir|0o700 {
		return false
	}
	f, err := root.OpenFile(protocol.OutDir, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return errors.Is(err, io.EOF)
}

// outEntry is one regular file found under out/.
type outEntry struct {
	path string // "out/…"
	info fs.FileInfo
}

// collectOut returns the regular files under dir's out/, sorted by path,
// each read only if it fits the outputs budget b (which it charges); from the
// first that does not, every file is listed as omitted. Links, FIFOs, sockets
// and devices are skipped and never opened; a file that changed type or
// identity since it was listed is skipped too. A listing longer than
// maxOutFiles ends there and truncates the budget. A missing or replaced
// out/ yields no files.
func collectOut(dir string, b *outputBudget) []protocol.OutFile {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	if st, err := root.Lstat(protocol.OutDir); err != nil || !st.IsDir() {
		return nil
	}
	entries, complete := listOut(root)
	slices.SortFunc(entries, func(x, y outEntry) int { return compareStrings(x.path, y.path) })
	files := make([]protocol.OutFile, 0, len(entries))
	for _, e := range entries {
		if f, ok := readOut(root, e, b); ok {
			files = append(files, f)
		}
	}
	if !complete {
		b.truncate()
	}
	return files
}

func compareStrings(x, y string) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// listOut walks out/ depth first without following links, keeping regular
// files; it reports false when it stopped at maxOutFiles files or
// maxOutEntries entries.
func listOut(root *os.Root) ([]outEntry, bool) {
	var entries []outEntry
	pending := []string{protocol.OutDir}
	seen := 0
	for len(pending) > 0 {
		dir := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		for _, de := range readDir(root, dir) {
			if seen++; seen > maxOutEntries {
				return entries, false
			}
			p := dir + "/" + de.Name()
			switch {
			case len(p) > maxOutPathLen:
			case de.IsDir():
				pending = append(pending, p)
			case de.Type().IsRegular():
				if len(entries) == maxOutFiles {
					return entries, false
				}
				if info, err := de.Info(); err == nil {
					entries = append(entries, outEntry{path: p, info: info})
				}
			}
		}
	}
	return entries, true
}

// readDir lists one folder of out/ (nil when it is no longer a folder).
func readDir(root *os.Root, dir string) []fs.DirEntry {
	if st, err := root.Lstat(dir); err != nil || !st.IsDir() {
		return nil
	}
	f, err := root.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	des, _ := f.ReadDir(maxOutFiles + 1)
	return des
}

// readOut opens a listed file without blocking (a FIFO swapped in stays
// unread), checks it is still the regular file listed, and reads it when its
// size fits the budget; otherwise it is listed as omitted.
func readOut(root *os.Root, e outEntry, b *outputBudget) (protocol.OutFile, bool) {
	f, err := root.OpenFile(e.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return protocol.OutFile{}, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || !os.SameFile(st, e.info) {
		return protocol.OutFile{}, false
	}
	out := protocol.OutFile{Path: e.path, Size: st.Size()}
	if !b.take(st.Size()) {
		out.Omitted = true
		return out, true
	}
	data := make([]byte, st.Size())
	n, _ := io.ReadFull(f, data) // a file that shrank meanwhile: what is there
	out.Data, out.Size = data[:n], int64(n)
	return out, true
}
