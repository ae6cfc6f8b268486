package wheelset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// Bounds on what uv says back.
const (
	maxPins        = 1000     // packages in one resolved set
	maxUVOutput    = 1 << 20  // bytes of uv's standard output read
	maxUVError     = 64 << 10 // bytes of uv's standard error read
	maxMessageLine = 1000     // bytes of uv's reason in an InstallError
)

// install resolves reqs, installs the resolved set unless it is published
// already, and returns its key. It runs once per request key at a time
// (Acquire's singleflight).
func (c *Cache) install(reqs []Requirement, rkey string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
	defer cancel()
	stage, err := os.MkdirTemp(filepath.Join(c.o.Root, dirStaging), "install-")
	if err != nil {
		return "", fmt.Errorf("package cache: %w", err)
	}
	defer removeTree(stage)
	pins, err := c.resolve(ctx, reqs, stage)
	if err != nil {
		return "", err
	}
	key := hashLines(append([]string{"set", c.pyID}, pins...))
	if _, err := os.Lstat(filepath.Join(c.SetsDir(), key)); err != nil {
		if err := c.installSet(ctx, reqs, pins, stage, key); err != nil {
			return "", err
		}
	}
	c.record(rkey, key, stage)
	c.evict(key)
	return key, nil
}

// resolve asks uv for the exact versions and wheel digests that satisfy
// reqs and the allow-list's constraints, wheels only: sorted lines
// "name==version --hash=sha256:<hex> …". The digests make the set's key
// its content: a wheel of the same name and version from another source is
// another set, and the installation checks every wheel against them.
func (c *Cache) resolve(ctx context.Context, reqs []Requirement, stage string) ([]string, error) {
	in := filepath.Join(stage, "requirements.in")
	if err := writeLines(in, reqs); err != nil {
		return nil, err
	}
	args := []string{"pip", "compile", "--no-header", "--no-annotate", "--quiet", "--generate-hashes", in}
	if cs := c.o.Allow.Constraints(); len(cs) > 0 {
		file := filepath.Join(stage, "constraints.txt")
		if err := writeLines(file, cs); err != nil {
			return nil, err
		}
		args = append(args, "--constraint", file)
	}
	out, err := c.uv(ctx, reqs, args...)
	if err != nil {
		return nil, err
	}
	return parsePins(out, reqs)
}

// parsePins validates uv's resolution: each entry (continued over lines
// ending in a backslash) name==version and at least one sha256 digest.
func parsePins(out []byte, reqs []Requirement) ([]string, error) {
	bad := &InstallError{Msg: "packages " + listOf(reqs) + ": uv's resolution is not a list of name==version lines with sha256 digests"}
	var pins []string
	for _, entry := range strings.Split(strings.ReplaceAll(string(out), "\\\n", " "), "\n") {
		fields := strings.Fields(entry)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		r, err := ParseRequirement(fields[0])
		hashes := fields[1:]
		if err != nil || !strings.HasPrefix(r.Spec, "==") || strings.Contains(r.Spec, ",") || len(pins) == maxPins ||
			len(hashes) == 0 || !slices.ContainsFunc(hashes, isDigest) || slices.ContainsFunc(hashes, func(h string) bool { return !isDigest(h) }) {
			return nil, bad
		}
		slices.Sort(hashes)
		pins = append(pins, r.String()+" "+strings.Join(hashes, " "))
	}
	slices.Sort(pins)
	return pins, nil
}

// isDigest: "--hash=sha256:" and 64 lower-case hex digits.
func isDigest(field string) bool {
	hex, ok := strings.CutPrefix(field, "--hash=sha256:")
	return ok && isKey(hex)
}

// installSet installs the pinned set into a staging directory, seals it
// read-only and publishes it as sets/<key> by one rename. A set another
// daemon published first wins; this one is dropped.
func (c *Cache) installSet(ctx context.Context, reqs []Requirement, pins []string, stage, key string) error {
	pinFile := filepath.Join(stage, "pins.txt")
	if err := os.WriteFile(pinFile, []byte(strings.Join(pins, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	target := filepath.Join(stage, "set")
	if _, err := c.uv(ctx, reqs, "pip", "install", "--quiet", "--no-deps", "--require-hashes", "--link-mode", "copy",
		"--compile-bytecode", "--target", target, "-r", pinFile); err != nil {
		return err
	}
	size, err := seal(target)
	if err != nil {
		return &InstallError{Msg: "packages " + listOf(reqs) + ": the installed set was refused: " + err.Error()}
	}
	if c.o.MaxBytes > 0 && size > c.o.MaxBytes {
		return &InstallError{Msg: fmt.Sprintf("packages %s: the installed set takes %d bytes, more than the package cache may hold (%d)",
			listOf(reqs), size, c.o.MaxBytes)}
	}
	if err := os.Rename(target, filepath.Join(c.SetsDir(), key)); err != nil {
		if _, lerr := os.Lstat(filepath.Join(c.SetsDir(), key)); lerr != nil {
			return fmt.Errorf("package cache: %w", err)
		}
		return nil // published by another daemon meanwhile; stage's copy goes with stage
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

// uv runs uv with the cache's sources and the arguments after them, in a
// process group of its own that ctx's end kills whole, and returns its
// standard output. A failure is an *InstallError naming reqs and the first
// lines of uv's reason.
func (c *Cache) uv(ctx context.Context, reqs []Requirement, args ...string) ([]byte, error) {
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
	cmd.Env = uvEnv(os.Environ())
	cmd.Dir = c.o.Root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	stdout, stderr := &capped{n: maxUVOutput}, &capped{n: maxUVError}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, &InstallError{Msg: "packages " + listOf(reqs) + ": installation timed out after " + c.o.Timeout.String()}
	}
	if err != nil {
		return nil, &InstallError{Msg: "packages " + listOf(reqs) + ": " + reason(stderr.b.Bytes(), err)}
	}
	return stdout.b.Bytes(), nil
}

// uvEnv is the daemon's environment without what would steer uv away from
// the options the cache gives it (UV_*, PIP_*, a virtual environment) and
// without the daemon's own settings (CODERUN_*: the service token among
// them), which uv has no use for.
func uvEnv(env []string) []string {
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

// reason is uv's error output as one printable line: its lines joined,
// "error: " and "cause: " prefixes dropped, bounded: the
// headline, a colon, then the explanation.
func reason(stderr []byte, err error) string {
	var parts []string
	for _, line := range strings.Split(string(stderr), "\n") {
		line = strings.TrimSpace(strings.Map(printable, line))
		line = strings.TrimPrefix(strings.TrimPrefix(line, "error: "), "cause: ")
		if line != "" {
			parts = append(parts, line)
		}
	}
	if len(parts) == 0 {
		return "uv failed: " + err.Error()
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

// seal makes an installed tree read-only (files 0444, directories 0555)
// and returns its size; a symbolic link or any file that is neither a
// regular file nor a directory refuses the tree. Folders are sealed after
// their entries (WalkDir visits a folder first, so they are collected).
func seal(root string) (int64, error) {
	var size int64
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, path)
			return nil
		case !d.Type().IsRegular():
			rel, _ := filepath.Rel(root, path)
			return fmt.Errorf("%s is not a regular file", rel)
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
