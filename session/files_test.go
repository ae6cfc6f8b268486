package session

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// madeDir is a directory made and held as the daemon makes a run's
// (rundir.Make), removed when the test ends; dir is its path.
func madeDir(t *testing.T) (wd *rundir.Dir, dir string) {
	t.Helper()
	wd, err := rundir.Make(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropDir(wd, nil) })
	return wd, wd.Path()
}

// The pieces a session reuses around each of its runs: stageFiles, resetOut
// and collectOut (docs/child-protocol-daemon.md §4.9.1), on a real directory.

// C415
func TestStageFilesReplacesAndStaysInside(t *testing.T) {
	wd, dir := madeDir(t)
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
	if err := stageFiles(wd, files); err != nil {
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
	if err := stageFiles(wd, []protocol.InputFile{{Path: "away/x", Data: nil}}); err != nil {
		t.Fatal(err)
	}
	os.Symlink(outside, filepath.Join(dir, "out2"))
	if err := stageFiles(wd, []protocol.InputFile{{Path: "out2/x", Data: []byte("x")}}); err == nil ||
		!strings.Contains(err.Error(), "failed to stage run.files") {
		t.Errorf("writing through a link out: %v", err)
	}
}

func TestResetOutAndCollect(t *testing.T) {
	wd, dir := madeDir(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600)
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	b := outputBudget{limit: 100}
	if files := collectOut(wd, &b, time.Now().Add(time.Minute)); len(files) != 0 {
		t.Fatalf("a linked out/ gave %+v", files)
	}
	if err := resetOut(wd); err != nil {
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
	files := collectOut(wd, &b, time.Now().Add(time.Minute))
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
	files = collectOut(wd, &b, time.Now().Add(time.Minute))
	if len(files) != 3 || string(files[1].Data) != "1234567890" || b.used != 107 || b.truncated {
		t.Errorf("with room: %+v used %d", files, b.used)
	}
	if err := resetOut(wd); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("resetOut left %v", ents)
	}
}

// resetOut keeps an out/ that is already an empty 0700 folder (no rmdir and
// mkdir per session run) and replaces one with other permissions.
func TestResetOutKeepsAnEmptyFolder(t *testing.T) {
	wd, dir := madeDir(t)
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(out)
	if err := resetOut(wd); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(out)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("an empty 0700 out/ was replaced (%v)", err)
	}
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := resetOut(wd); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(out); err != nil || st.Mode() != fs.ModeDir|0o700 {
		t.Fatalf("out/ after reset: %v %v, want a 0700 folder", st, err)
	}
}

// C645: collectOut's walk is bounded: a folder deeper than maxOutDepth is not
// entered and its files are not returned, the rest is, and the budget is
// truncated (the marker); a walk past its deadline returns what it read by
// then, here nothing, and truncates the budget too.
func TestCollectOutBounded(t *testing.T) {
	leakcheck.Check(t)
	wd, dir := madeDir(t)
	p := filepath.Join(dir, protocol.OutDir)
	for range maxOutDepth + 5 {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(p, "deepest"), []byte("x"), 0o600)
	within := filepath.Join(dir, protocol.OutDir) + strings.Repeat("/d", maxOutDepth-1)
	os.WriteFile(filepath.Join(within, "deep"), []byte("y"), 0o600)
	os.WriteFile(filepath.Join(dir, protocol.OutDir, "top"), []byte("z"), 0o600)
	b := outputBudget{limit: 100}
	files := collectOut(wd, &b, time.Now().Add(time.Minute))
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	want := []string{"out" + strings.Repeat("/d", maxOutDepth-1) + "/deep", "out/top"}
	if !slices.Equal(got, want) || !b.truncated {
		t.Errorf("got %v (truncated %v), want %v", got, b.truncated, want)
	}
	b = outputBudget{limit: 100}
	if files := collectOut(wd, &b, time.Now().Add(-time.Second)); len(files) != 0 || !b.truncated {
		t.Errorf("past the deadline: %d files, truncated %v", len(files), b.truncated)
	}
}

// A collection ends at the run's wall deadline, or a second from now when
// that is nearer or past.
func TestCollectDeadline(t *testing.T) {
	now := time.Now()
	if d := collectDeadline(now, 30000); d.Sub(now) != 30*time.Second {
		t.Errorf("a run with 30 s of wall left: %v", d.Sub(now))
	}
	if d := collectDeadline(now.Add(-time.Minute), 30000); d.Before(now.Add(outCollectMin)) || d.After(time.Now().Add(outCollectMin)) {
		t.Errorf("a run past its wall deadline: %v from now", d.Sub(now))
	}
}
