package session

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// The pieces a session reuses around each of its runs: stageFiles, resetOut
// and collectOut (docs/child-protocol.md §4.9.1), on a real directory.

// C415
func TestStageFilesReplacesAndStaysInside(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	// What a session's earlier run may have left: a link out, a FIFO, a file.
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []protocol.InputFile{{Path: "a/b/c.txt", Data: []byte("abc")}, {Path: "fifo", Data: []byte("f")},
		{Path: "link", Data: []byte("l")}}
	if err := stageFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f.Path))
		if err != nil || string(got) != string(f.Data) {
			t.Errorf("%s = %q, %v", f.Path, got, err)
		}
	}
	if st, _ := os.Lstat(filepath.Join(dir, "link")); !st.Mode().IsRegular() {
		t.Errorf("the link was written through, not replaced")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("something was written outside: %v", ents)
	}
	// A folder through a link that leaves the directory is refused.
	if err := stageFiles(dir, []protocol.InputFile{{Path: "away/x", Data: nil}}); err != nil {
		t.Fatal(err)
	}
	os.Symlink(outside, filepath.Join(dir, "out2"))
	if err := stageFiles(dir, []protocol.InputFile{{Path: "out2/x", Data: []byte("x")}}); err == nil ||
		!strings.Contains(err.Error(), "failed to stage run.files") {
		t.Errorf("writing through a link out: %v", err)
	}
}

func TestResetOutAndCollect(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600)
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	b := outputBudget{limit: 100}
	if files := collectOut(dir, &b); len(files) != 0 {
		t.Fatalf("a linked out/ gave %+v", files)
	}
	if err := resetOut(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Fatalf("resetOut followed the link: %v", err)
	}
	out := filepath.Join(dir, "out")
	os.MkdirAll(filepath.Join(out, "d"), 0o700)
	os.WriteFile(filepath.Join(out, "d", "z"), []byte("zz"), 0o600)
	os.WriteFile(filepath.Join(out, "d-a"), []byte("1234567890"), 0o600)
	os.WriteFile(filepath.Join(out, "big"), make([]byte, 95), 0o600)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(out, "s"))
	os.Symlink(outside, filepath.Join(out, "sd"))
	b = outputBudget{limit: 100, used: 3}
	files := collectOut(dir, &b)
	var got []string
	for _, f := range files {
		got = append(got, fmt.Sprintf("%s:%d:%d:%v", f.Path, f.Size, len(f.Data), f.Omitted))
	}
	// Sorted by path ("d-a" < "d/z"); 95 of 97 fit, then 10 does not: it and every later
	// file are omitted, the 2-byte one too (no back-filling).
	want := "out/big:95:95:false out/d-a:10:0:true out/d/z:2:0:true"
	if strings.Join(got, " ") != want || !b.truncated {
		t.Errorf("got %s (truncated %v), want %s", strings.Join(got, " "), b.truncated, want)
	}
	b = outputBudget{limit: 200}
	files = collectOut(dir, &b)
	if len(files) != 3 || string(files[1].Data) != "1234567890" || b.used != 107 || b.truncated {
		t.Errorf("with room: %+v used %d", files, b.used)
	}
	if err := resetOut(dir); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("resetOut left %v", ents)
	}
}

// resetOut keeps an out/ that is already an empty 0700 folder (no rmdir and
// mkdir per session run) and replaces one with other permissions.
func TestResetOutKeepsAnEmptyFolder(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(out)
	if err := resetOut(dir); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(out)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("an empty 0700 out/ was replaced (%v)", err)
	}
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := resetOut(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(out); err != nil || st.Mode() != fs.ModeDir|0o700 {
		t.Fatalf("out/ after reset: %v %v, want a 0700 folder", st, err)
	}
}
