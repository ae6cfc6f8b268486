// Package wheeltest writes tiny Python wheels (and an sdist) into a
// find-links directory, so that the package tests need no network: each
// wheel is a zip with the module files, METADATA, WHEEL and a RECORD of
// their sha256 digests, as a build backend would write it.
package wheeltest

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Wheel describes one pure-Python wheel.
type Wheel struct {
	Name, Version string
	Files         map[string]string // path in the wheel → content
	Requires      []string          // Requires-Dist lines
	// Links are symbolic-link entries (path → target), as a hostile wheel
	// may carry; listed in RECORD like files.
	Links map[string]string
}

// FileName is the wheel's file name (py3-none-any).
func (w Wheel) FileName() string {
	return fmt.Sprintf("%s-%s-py3-none-any.whl", strings.ReplaceAll(w.Name, "-", "_"), w.Version)
}

// Write writes the wheel into dir and returns its path.
func Write(t testing.TB, dir string, w Wheel) string {
	t.Helper()
	path, err := WriteWheel(dir, w)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// WriteWheel is Write for a caller without a testing.TB (the bench).
func WriteWheel(dir string, w Wheel) (string, error) {
	dist := strings.ReplaceAll(w.Name, "-", "_") + "-" + w.Version + ".dist-info"
	files := map[string]string{}
	for p, c := range w.Files {
		files[p] = c
	}
	meta := "Metadata-Version: 2.1\nName: " + w.Name + "\nVersion: " + w.Version + "\n"
	for _, r := range w.Requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files[dist+"/METADATA"] = meta
	files[dist+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: wheeltest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	var record strings.Builder
	for p, c := range w.Links {
		sum := sha256.Sum256([]byte(c))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(c))
	}
	for p, c := range files {
		sum := sha256.Sum256([]byte(c))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(c))
	}
	record.WriteString(dist + "/RECORD,,\n")
	files[dist+"/RECORD"] = record.String()
	path := filepath.Join(dir, w.FileName())
	return path, writeZip(path, files, w.Links)
}

// writeZip writes a zip of files and symbolic links at path.
func writeZip(path string, files, links map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	z := zip.NewWriter(f)
	for p, target := range links {
		h := &zip.FileHeader{Name: p, Method: zip.Deflate}
		h.SetMode(os.ModeSymlink | 0o777)
		if err = add(z, h, target); err != nil {
			break
		}
	}
	for p, c := range files {
		if err != nil {
			break
		}
		err = add(z, &zip.FileHeader{Name: p, Method: zip.Deflate}, c)
	}
	return errors.Join(err, z.Close(), f.Close())
}

func add(z *zip.Writer, h *zip.FileHeader, content string) error {
	w, err := z.CreateHeader(h)
	if err == nil {
		_, err = w.Write([]byte(content))
	}
	return err
}

// UV is the uv binary the tests use (LocateUV). A test fails without one:
// `make test` installs it.
func UV(t testing.TB) string {
	t.Helper()
	p, err := LocateUV()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// LocateUV is $CODERUN_UV_BIN, else the uv the project's .venv holds
// (requirements-test.txt installs it), else uv on PATH.
func LocateUV() (string, error) {
	if p := os.Getenv("CODERUN_UV_BIN"); p != "" {
		return p, nil
	}
	_, file, _, _ := runtime.Caller(0)
	venv := filepath.Join(filepath.Dir(file), "..", "..", ".venv", "bin", "uv")
	if _, err := os.Stat(venv); err == nil {
		return venv, nil
	}
	p, err := exec.LookPath("uv")
	if err != nil {
		return "", errors.New("no uv: `make deps` installs it into .venv (requirements-test.txt)")
	}
	return p, nil
}

// Tiny writes the packages most tests use into a new directory under t's
// and returns it: tinya 1.0 (which needs tinyb ≥ 1; tinya.A is "a1" + the
// tinyb it found), tinyb 1.0 and 2.0 (tinyb.B is "b" + its version).
func Tiny(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	Write(t, dir, Wheel{Name: "tinya", Version: "1.0", Requires: []string{"tinyb>=1"},
		Files: map[string]string{"tinya/__init__.py": "from tinyb import B\nA = 'a1' + B\n"}})
	for _, v := range []string{"1.0", "2.0"} {
		Write(t, dir, Wheel{Name: "tinyb", Version: v, Files: map[string]string{"tinyb/__init__.py": "B = 'b" + v + "'\n"}})
	}
	return dir
}

// CountingUV is a uv wrapper (a shell script under t's directory) that
// appends a line to log for each "uv pip install" before running the real
// uv, so that a test counts installations (Installs).
func CountingUV(t testing.TB) (uv, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "installs")
	uv = filepath.Join(dir, "uv")
	script := "#!/bin/sh\nif [ \"$2\" = install ]; then echo x >> '" + log + "'; fi\nexec '" + UV(t) + "' \"$@\"\n"
	if err := os.WriteFile(uv, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return uv, log
}

// Installs is how many installations CountingUV's log counts.
func Installs(t testing.TB, log string) int {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "x")
}

// Unseal makes every folder under dir writable again, so that a test's
// temporary directory holding sealed package sets (folders 0555) can be
// removed by a daemon user that is not root.
func Unseal(dir string) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o755)
		}
		return nil
	})
}

// HangingUV is a uv wrapper whose installations never end: each writes a
// mark at started, then sleeps; anything else runs the real uv. A test
// waits for started, then checks what stops the installation.
func HangingUV(t testing.TB) (uv, started string) {
	t.Helper()
	dir := t.TempDir()
	started = filepath.Join(dir, "started")
	uv = filepath.Join(dir, "uv")
	script := "#!/bin/sh\nif [ \"$2\" = install ]; then echo x > '" + started + "'; exec sleep 600; fi\nexec '" + UV(t) + "' \"$@\"\n"
	if err := os.WriteFile(uv, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return uv, started
}

// AwaitFile returns once path exists, or with done's error if done yields
// first (what was to start it ended instead).
func AwaitFile(t testing.TB, path string, done <-chan error) {
	t.Helper()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("ended before %s appeared: %v", path, err)
		case <-time.After(10 * time.Millisecond): // polling for a mark another process writes
		}
	}
}
