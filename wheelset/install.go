package wheelset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Bounds on what a tool (uv, the bytecode compiler) says back.
const (
	maxToolError   = 64 << 10 // bytes of its standard error read
	maxMessageLine = 1000     // bytes of its reason in an InstallError
)

// install resolves and installs reqs into a staging directory in one uv
// run, compiles their bytecode (compileBytecode), seals the tree
// read-only, and publishes it as sets/<key> by one rename, key being the
// hash of what the wheels installed; a set with that key (published by
// another daemon, or for another request) is used instead. It runs once per request key at a time
// (Acquire's flights), until ctx ends.
func (c *Cache) install(ctx context.Context, reqs []Requirement, rkey string) (string, error) {
	stage, err := os.MkdirTemp(filepath.Join(c.o.Root, dirStaging), "install-")
	if err != nil {
		return "", fmt.Errorf("package cache: %w", err)
	}
	defer removeTree(stage)
	args, err := c.installArgs(reqs, stage)
	if err != nil {
		return "", err
	}
	target := filepath.Join(stage, "set")
	if err := os.Mkdir(target, 0o755); err != nil {
		return "", fmt.Errorf("package cache: %w", err)
	}
	// The first compiler starts now: the interpreter's start overlaps uv's run.
	first, err := c.startCompiler(ctx, reqs, target)
	if err != nil {
		return "", err
	}
	defer first.finish(0, nil)
	if err := c.uv(ctx, reqs, stage, append(args, "--target", target)...); err != nil {
		return "", err
	}
	if err := dropInstallerNotes(target); err != nil {
		return "", refused(reqs, err)
	}
	installed, err := scan(target)
	if err != nil {
		return "", refused(reqs, err)
	}
	budget := int64(-1)
	if c.o.MaxBytes > 0 {
		if err := c.withinBound(reqs, installed.size); err != nil {
			return "", err // before any bytecode is compiled
		}
		budget = c.o.MaxBytes - installed.size
	}
	if err := c.compileBytecode(ctx, reqs, target, installed.sources, first, budget); err != nil {
		return "", err
	}
	size, err := seal(target)
	if err != nil {
		return "", refused(reqs, err)
	}
	if err := c.withinBound(reqs, size); err != nil {
		return "", err
	}
	key := hashLines([]string{"set", c.pyID, installed.digest})
	if err := c.publish(target, key, size); err != nil {
		return "", err
	}
	c.record(rkey, key, stage)
	c.evict(key)
	return key, nil
}

// withinBound refuses a set of size bytes larger than the cache may hold.
func (c *Cache) withinBound(reqs []Requirement, size int64) error {
	if c.o.MaxBytes > 0 && size > c.o.MaxBytes {
		return &InstallError{Msg: fmt.Sprintf("packages %s: the installed set takes %d bytes, more than the package cache may hold (%d)",
			listOf(reqs), size, c.o.MaxBytes)}
	}
	return nil
}

func refused(reqs []Requirement, err error) error {
	return &InstallError{Msg: "packages " + listOf(reqs) + ": the installed set was refused: " + err.Error()}
}

// installArgs are uv's arguments for reqs, with the allow-list's
// constraints: requirement files written into stage.
func (c *Cache) installArgs(reqs []Requirement, stage string) ([]string, error) {
	in := filepath.Join(stage, "requirements.in")
	if err := writeLines(in, reqs); err != nil {
		return nil, err
	}
	args := []string{"pip", "install", "--quiet", "--link-mode", "copy", "-r", in}
	if cs := c.o.Allow.Constraints(); len(cs) > 0 {
		file := filepath.Join(stage, "constraints.txt")
		if err := writeLines(file, cs); err != nil {
			return nil, err
		}
		args = append(args, "--constraint", file)
	}
	return args, nil
}

// publish renames the sealed tree to sets/<key> unless a set of that key
// is published already (its content is the same), and writes the size
// into the set's lock file.
func (c *Cache) publish(tree, key string, size int64) error {
	dest := filepath.Join(c.SetsDir(), key)
	if err := os.Rename(tree, dest); err != nil {
		if _, lerr := os.Lstat(dest); lerr != nil {
			return fmt.Errorf("package cache: %w", err)
		}
		return nil // published first by another; tree goes with its staging directory
	}
	// The lock file is written in place, never replaced: a lock held on it
	// must stay the one eviction tries.
	return os.WriteFile(filepath.Join(c.o.Root, dirLocks, key), []byte(strconv.FormatInt(size, 10)), 0o644)
}

// record stores the request's resolution, in memory and on disk.
func (c *Cache) record(rkey, key, stage string) {
	c.remember(rkey, key)
	_ = writeAtomic(filepath.Join(c.o.Root, dirRequests, rkey), key, stage)
}

// uv runs uv with the cache's sources and the arguments after them
// (runTool), its temporary files (its working cache among them) in stage,
// which the installation's end removes even when uv was killed; a failure
// names reqs and the first lines of uv's reason.
func (c *Cache) uv(ctx context.Context, reqs []Requirement, stage string, args ...string) error {
	args = append(args, "--no-config", "--no-progress", "--color", "never", "--only-binary", ":all:",
		"--python", c.o.Python, "--no-cache")
	if c.o.Index == "" {
		args = append(args, "--no-index")
	} else {
		args = append(args, "--index-url", c.o.Index)
	}
	for _, f := range c.o.FindLinks {
		args = append(args, "--find-links", f)
	}
	cmd := exec.CommandContext(ctx, c.o.UV, args...)
	cmd.Dir, cmd.Env = c.o.Root, []string{"TMPDIR=" + stage}
	return c.runTool(ctx, reqs, "", cmd)
}

// runTool runs cmd (startTool) and waits for it (toolError).
func (c *Cache) runTool(ctx context.Context, reqs []Requirement, step string, cmd *exec.Cmd) error {
	stderr, err := startTool(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	return c.toolError(ctx, reqs, cmd, step, stderr, err)
}

// startTool starts cmd (made with ctx, its Dir and Stdin set) for an
// installation: with toolEnv's environment and the variables cmd.Env holds
// (which win), in a process group of its own that ctx's end kills whole,
// its standard output dropped and the head of its standard error kept.
func startTool(cmd *exec.Cmd) (*capped, error) {
	cmd.Env = append(toolEnv(os.Environ()), cmd.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	stderr := &capped{n: maxToolError}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	return stderr, cmd.Start()
}

// toolError maps how cmd, a tool of the installation of reqs, ended (err,
// from its start or its wait): ctx's end first, else a failure is an
// *InstallError naming reqs, then step and the first lines of the tool's
// reason (or, when it gave none, the tool's name and err).
func (c *Cache) toolError(ctx context.Context, reqs []Requirement, cmd *exec.Cmd, step string, stderr *capped, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &InstallError{Msg: "packages " + listOf(reqs) + ": installation timed out after " + c.o.Timeout.String()}
	}
	if ctx.Err() != nil {
		return ctx.Err() // stopped: nobody waits for it
	}
	if err != nil {
		return &InstallError{Msg: "packages " + listOf(reqs) + ": " + step + reason(stderr.b.Bytes(), filepath.Base(cmd.Path), err)}
	}
	return nil
}

// toolEnv is the daemon's environment without what would steer uv away
// from the options the cache gives it (UV_*, PIP_*, a virtual environment)
// and without the daemon's own settings (CODERUN_*: the service token among
// them), which neither uv nor the compiler has any use for.
func toolEnv(env []string) []string {
	out := []string{"NO_COLOR=1"}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "UV_") || strings.HasPrefix(name, "PIP_") || strings.HasPrefix(name, "CODERUN_") ||
			name == "VIRTUAL_ENV" || name == "CONDA_PREFIX" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// reason is a tool's error output as one printable line: its lines
// joined, "error: " and "cause: " prefixes dropped, bounded: the headline,
// a colon, then the explanation; without output, the tool's name and err.
func reason(stderr []byte, tool string, err error) string {
	var parts []string
	for _, line := range strings.Split(string(stderr), "\n") {
		line = strings.TrimSpace(strings.Map(printable, line))
		line = strings.TrimPrefix(strings.TrimPrefix(line, "error: "), "cause: ")
		if line != "" {
			parts = append(parts, line)
		}
	}
	if len(parts) == 0 {
		return tool + " failed: " + err.Error()
	}
	msg := parts[0]
	if len(parts) > 1 {
		msg += ": " + strings.Join(parts[1:], " ")
	}
	if len(msg) > maxMessageLine {
		msg = strings.ToValidUTF8(msg[:maxMessageLine], "") + "…"
	}
	return msg
}

func printable(r rune) rune {
	if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 {
		return ' '
	}
	return r
}

// capped keeps the first n bytes written and drops the rest.
type capped struct {
	b bytes.Buffer
	n int
}

func (w *capped) Write(p []byte) (int, error) {
	if room := w.n - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// installedTree is what scan learnt of a tree uv installed.
type installedTree struct {
	digest  string   // the installed content: each file's path and sha256
	sources []string // the Python sources (.py), relative to the tree
	size    int64    // the files' bytes
}

// scan reads a tree uv installed, before anything else writes into it: a
// symbolic link or any file that is neither a regular file nor a directory
// refuses the tree. Its digest covers every file, bytecode the wheels ship
// included (an import may load it); the installer's notes that differ
// between installations are gone by then (dropInstallerNotes): the same
// wheels give the same digest.
func scan(root string) (installedTree, error) {
	var t installedTree
	var lines []string
	err := walkRegular(root, func(path, rel string, d fs.DirEntry) error {
		if d.IsDir() {
			return nil
		}
		sum, n, err := hashFile(path)
		if err != nil {
			return err
		}
		t.size += n
		lines = append(lines, rel+"\x00"+sum)
		if strings.HasSuffix(rel, ".py") {
			t.sources = append(t.sources, rel)
		}
		return nil
	})
	slices.Sort(lines)
	t.digest = hashLines(lines)
	return t, err
}

// maxRecordBytes bounds a distribution's RECORD, which the daemon reads
// whole to rewrite it: a wheel may plant one of any size (a package of
// fifty thousand files lists them in a few megabytes).
const maxRecordBytes = 32 << 20

// dropInstallerNotes removes what uv writes into a tree that differs
// between installations of the same wheels: each distribution's
// uv_cache.json (a timestamp, for a uv that never touches a set again) and
// its line in the distribution's RECORD, rewritten without it. Everything
// else the tree holds is then content, whatever its name (a wheel may plant a
// second .dist-info folder through its .data/purelib). The tree is uv's
// output, not yet checked: a .dist-info that is not a folder is left to scan
// to refuse, no file is opened through a link, and a RECORD past
// maxRecordBytes refuses the tree.
func dropInstallerNotes(root string) error {
	entries, err := os.ReadDir(root) // not a glob: root's own name may hold glob characters
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".dist-info") { // a link is not a folder here
			continue
		}
		dir, note := filepath.Join(root, e.Name()), e.Name()+"/uv_cache.json,"
		if err := os.Remove(filepath.Join(dir, "uv_cache.json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		record := filepath.Join(dir, "RECORD")
		f, err := os.OpenFile(record, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
		f.Close()
		if err != nil {
			return err
		}
		if len(b) > maxRecordBytes {
			return fmt.Errorf("%s/RECORD is larger than %d bytes", e.Name(), maxRecordBytes)
		}
		lines := strings.SplitAfter(string(b), "\n")
		kept := slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return strings.HasPrefix(l, note) })
		if len(kept) != len(lines) {
			if err := writeAtomic(record, strings.Join(kept, ""), dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// seal makes a tree read-only (files 0444, directories 0555, each folder
// after its entries) and returns its size in bytes; like scan, it refuses
// anything but regular files and directories.
func seal(root string) (int64, error) {
	var size int64
	var dirs []string
	err := walkRegular(root, func(path, _ string, d fs.DirEntry) error {
		if d.IsDir() {
			dirs = append(dirs, path)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		return os.Chmod(path, 0o444)
	})
	if err != nil {
		return 0, err
	}
	for _, d := range slices.Backward(dirs) {
		if err := os.Chmod(d, 0o555); err != nil {
			return 0, err
		}
	}
	return size, nil
}

// walkRegular calls visit for each directory and regular file under root
// (with its path relative to root), without following links, and fails on
// anything else.
func walkRegular(root string, visit func(path, rel string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		return visit(path, rel, d)
	})
}

// hashFile is a regular file's sha256 and size, read through a descriptor
// that does not follow a link.
func hashFile(path string) (string, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// removeTree removes a staged or evicted tree, sealed or not: folders are
// made writable again on the way down. It never follows a link.
func removeTree(root string) {
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(root)
}

// writeLines writes one requirement a line.
func writeLines(path string, reqs []Requirement) error {
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString(r.String() + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	return nil
}

// writeAtomic replaces path with text: written beside it in dir, renamed.
func writeAtomic(path, text, dir string) error {
	f, err := os.CreateTemp(dir, "write-")
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
