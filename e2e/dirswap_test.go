package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// A program that swaps its working directory's name for something else
// (docs/containment.md §5): the daemon's staging, out/ reset, out/
// collection, fork copy and removal keep working on the directory the
// daemon made, through the descriptor it opened then, and never reach what
// the name now points to.

// hostDir is a directory of the host a program must not reach through the
// daemon: a file to keep, and an out/ with a secret in it.
type hostDir struct{ path string }

const hostSecret = "host secret"

func newHostDir(t *testing.T) hostDir {
	t.Helper()
	h := hostDir{t.TempDir()}
	if err := os.MkdirAll(filepath.Join(h.path, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"existing.txt": "keep", "out/secret.txt": hostSecret} {
		if err := os.WriteFile(filepath.Join(h.path, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// untouched fails t unless h holds exactly what newHostDir put there.
func (h hostDir) untouched(t *testing.T, when string) {
	t.Helper()
	var found []string
	filepath.WalkDir(h.path, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != h.path {
			rel, _ := filepath.Rel(h.path, p)
			found = append(found, rel)
		}
		return nil
	})
	if strings.Join(found, ",") != "existing.txt,out,out/secret.txt" {
		t.Errorf("%s: the host directory holds %v", when, found)
	}
	if b, _ := os.ReadFile(filepath.Join(h.path, "existing.txt")); string(b) != "keep" {
		t.Errorf("%s: existing.txt is %q", when, b)
	}
	if b, _ := os.ReadFile(filepath.Join(h.path, "out/secret.txt")); string(b) != hostSecret {
		t.Errorf("%s: out/secret.txt is %q", when, b)
	}
}

// swapProgram renames the working directory to "moved" beside it and puts
// what make (Python statements, the old name in cwd) builds in its place.
// It returns "swapped", or the error's type name where the tier refuses it.
func swapProgram(make string) string {
	return `import os
cwd = os.getcwd()
try:
    os.rename(cwd, os.path.dirname(cwd) + '/moved')
    ` + make + `
except OSError as e:
    return type(e).__name__
return 'swapped'`
}

// swaps are what the working directory's name is replaced with; target is
// the host directory's path, or the path of a victim run's /proc/<pid>/cwd.
var swaps = []struct {
	name    string
	program func(target string) string
}{
	{"symlink", func(target string) string { return swapProgram(fmt.Sprintf("os.symlink(%q, cwd)", target)) }},
	{"proc-cwd", func(target string) string { return swapProgram(fmt.Sprintf("os.symlink(%q, cwd)", target)) }},
	{"fifo", func(string) string { return swapProgram("os.mkfifo(cwd)") }},
	{"file", func(string) string { return swapProgram("open(cwd, 'w').write('x')") }},
	// out/ itself, the directory left in place
	{"out-symlink", func(target string) string {
		return fmt.Sprintf("import os\nos.rmdir('out')\nos.symlink(%q, 'out')\nreturn 'swapped'", target+"/out")
	}},
}

// hasSecret reports whether a run's raw result carries the host's secret or
// the victim's.
func hasSecret(raw json.RawMessage) bool {
	var r filesResult
	json.Unmarshal(raw, &r)
	for _, f := range r.Files {
		if strings.Contains(f.Path, "secret") || strings.Contains(f.Path, "victim") {
			return true
		}
	}
	return strings.Contains(string(raw), "secret")
}

// victim opens a session that keeps out/victim.txt in its directory (out/
// is only emptied before its own runs) and returns the path of its
// interpreter's /proc/<pid>/cwd, as the daemon sees it, and that file.
func victim(t *testing.T, d *daemon) (procCwd, file string) {
	t.Helper()
	sid := d.open(`{}`)
	r := d.srun(sid, "import os\nopen('out/victim.txt', 'w').write('victim data')\nreturn os.getcwd()")
	var cwd string
	if err := json.Unmarshal(r.Value, &cwd); err != nil {
		t.Fatalf("victim: %s %+v", r.Value, r.Error)
	}
	file = filepath.Join(cwd, "out", "victim.txt")
	// The interpreter is the process whose working directory is cwd (in tier
	// sandbox its own pid is the namespace's).
	procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, p := range procs {
		if l, err := os.Readlink(p); err == nil && l == cwd {
			return p, file
		}
	}
	t.Fatalf("no process runs in %s", cwd)
	return "", ""
}

// TestSessionDirSwapped (C640): in a session and in a fork, a run that
// renames its working directory and puts a link to a host directory (or to
// another run's /proc/<pid>/cwd), a FIFO or a file at its name, or that
// replaces out/ by a link, gets none of the host's files in result.files; a
// fork made then copies the session's own directory; the next run's out/
// reset and its files reach the session's own directory (the program reads
// them), and nothing of the host is deleted, created or replaced; closing
// the session removes the renamed directory too.
func TestSessionDirSwapped(t *testing.T) {
	leakcheck.Check(t)
	for _, from := range []string{"session", "fork"} {
		for _, s := range swaps {
			t.Run(from+"/"+s.name, func(t *testing.T) {
				host, tmp := newHostDir(t), t.TempDir()
				d := started(t, map[string]string{"TMPDIR": tmp})
				target, victimFile := host.path, ""
				if s.name == "proc-cwd" {
					target, victimFile = victim(t, d)
				}
				src := d.open(`{}`)
				d.srun(src, "x = 1")
				sid := src
				if from == "fork" {
					sid = d.fork(src)
				}
				in := `"sessionId":` + strconv.Quote(sid)
				first := d.call("run", prog(s.program(target), in))
				if first.Error != nil || hasSecret(first.Result) {
					t.Errorf("the swapping run: %s %+v", first.Result, first.Error)
				}
				if !strings.Contains(string(first.Result), `"value":"swapped"`) {
					t.Fatalf("the swap did not happen: %s", first.Result)
				}
				host.untouched(t, "after the swapping run")
				// A fork copies the directory the daemon made, not what its name leads to.
				copied := d.fork(sid)
				if r := d.srun(copied, "import os\nreturn sorted(os.listdir('.'))"); strings.Contains(string(r.Value), "existing.txt") ||
					strings.Contains(string(r.Value), "victim") || r.Error != nil {
					t.Errorf("the fork of the swapped directory sees %s %+v", r.Value, r.Error)
				}
				if m := d.call("session/close", `{"sessionId":`+strconv.Quote(copied)+`}`); m.Error != nil {
					t.Errorf("session/close of the copy: %+v", m.Error)
				}
				second := d.call("run", prog("import os\nopen('out/mine.txt', 'w').write('mine')\nreturn [open('existing.txt').read(), open('created.txt').read(), os.listdir('out')]",
					`"files":[{"path":"existing.txt","text":"new"},{"path":"created.txt","text":"made"}]`, in))
				if !strings.Contains(string(second.Result), `"value":["new","made",["mine.txt"]]`) || hasSecret(second.Result) {
					t.Errorf("the next run: %s %+v", second.Result, second.Error)
				}
				host.untouched(t, "after the next run")
				if victimFile != "" {
					if b, err := os.ReadFile(victimFile); string(b) != "victim data" {
						t.Errorf("the victim's out/ file: %q %v", b, err)
					}
				}
				closing := []string{sid}
				if src != sid {
					closing = append(closing, src) // a fork's home is removed with its family's
				}
				for _, id := range closing {
					if m := d.call("session/close", `{"sessionId":`+strconv.Quote(id)+`}`); m.Error != nil {
						t.Errorf("session/close: %+v", m.Error)
					}
				}
				host.untouched(t, "after session/close")
				waitFor(t, func() bool { return !holds(tmp, "moved") }, "the renamed directory removed")
			})
		}
	}
}

// TestRunDirSwapped (C641): a fresh run that renames its working directory
// and puts a link to a host directory in its place gets none of the host's
// out/ files back, its own out/ files are returned (tier process), and the
// directory it renamed is removed with the run.
// Tier sandbox refuses the rename (its directory's parent is not writable).
func TestRunDirSwapped(t *testing.T) {
	leakcheck.Check(t)
	host, tmp := newHostDir(t), t.TempDir()
	d := started(t, map[string]string{"TMPDIR": tmp, "CODERUN_WARM_POOL": "0"})
	m := d.call("run", prog(swapProgram(fmt.Sprintf("os.symlink(%q, cwd); open(os.path.dirname(cwd) + '/moved/out/mine.txt', 'w').write('mine')", host.path))))
	if m.Error != nil || hasSecret(m.Result) {
		t.Errorf("the swapping run: %s %+v", m.Result, m.Error)
	}
	if suiteTier == "process" && !strings.Contains(string(m.Result), `"files":[{"path":"out/mine.txt","size":4,"base64":"bWluZQ=="}]`) {
		t.Errorf("the run's own out/ file is not returned: %s", m.Result)
	}
	host.untouched(t, "after the run")
	waitFor(t, func() bool { return !holds(tmp, "moved") }, "the renamed directory removed")
}

// holds reports whether the tree under dir has an entry named name.
func holds(dir, name string) bool {
	found := false
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		found = found || (err == nil && d.Name() == name)
		return nil
	})
	return found
}

// TestOutDeepAndWide (C643): a program that leaves 60 nested folders and
// 1 500 sibling folders in out/ gets its result with both files it wrote,
// and the run queued behind it on the daemon's only slot is served (the
// collection walks each folder once, from its parent's descriptor, within
// its deadline). One that nests 1 000 folders (the review's) either ends
// before the disk budget's first measure, and gets its top file and the
// outputs marker (the collection does not enter folders past its depth), or
// is ended by the disk budget, which measures no deeper; either way the run
// queued behind it is served.
func TestOutDeepAndWide(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_MAX_CONCURRENT_RUNS": "1", "CODERUN_WARM_POOL": "1"})
	const tree = `import os
p = 'out'
for i in range(%d):
    p += '/d'
    os.mkdir(p)
open(p + '/deepest.txt', 'w').write('deep')
for i in range(1500):
    os.mkdir('out/s%%d' %% i)
open('out/top.txt', 'w').write('top')
return 1`
	deep := d.request("run", prog(fmt.Sprintf(tree, 60)))
	next := d.request("run", prog("return 2"))
	var r filesResult
	m := d.wait(deep)
	r.runResult = d.result(m)
	json.Unmarshal(m.Result, &r)
	expectOK(t, r.runResult, "1")
	if len(r.Files) != 2 || r.Files[1].Path != "out/top.txt" || string(r.Files[1].bytes(t)) != "top" ||
		!strings.HasSuffix(r.Files[0].Path, "/d/deepest.txt") || len(r.Outputs) != 0 {
		t.Errorf("files %+v outputs %+v", r.Files, r.Outputs)
	}
	expectOK(t, d.result(d.wait(next)), "2")
	deeper := d.request("run", prog(fmt.Sprintf(tree, 1000)))
	next = d.request("run", prog("return 3"))
	m = d.wait(deeper)
	r = filesResult{runResult: d.result(m)}
	json.Unmarshal(m.Result, &r)
	switch {
	case r.Error == nil:
		if len(r.Files) != 1 || r.Files[0].Path != "out/top.txt" || len(r.Outputs) != 1 ||
			!strings.HasPrefix(r.Outputs[0].Data["text/plain"], "[coderun] outputs truncated at ") {
			t.Errorf("1 000 nested folders, collected: files %+v outputs %+v", r.Files, r.Outputs)
		}
	case r.Error.Kind != "output-limit" || !strings.Contains(r.Error.Message, "deeper than the daemon measures"):
		t.Errorf("1 000 nested folders: %+v", r.Error)
	}
	expectOK(t, d.result(d.wait(next)), "3")
}
