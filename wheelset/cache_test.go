package wheelset

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/internal/wheeltest"
)

func python(t *testing.T) string {
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func openCache(t *testing.T, root, uv, findLinks string, maxBytes int64) *Cache {
	allow, _ := ParseAllowList("*")
	c, err := Open(Options{UV: uv, Python: python(t), Root: root, FindLinks: []string{findLinks},
		MaxBytes: maxBytes, Allow: allow, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(root) }) // sealed folders: t.TempDir's removal needs them writable
	return c
}

func reqs(t *testing.T, texts ...string) []Requirement {
	var out []Requirement
	for _, s := range texts {
		r, err := ParseRequirement(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// importFrom runs python with dir on sys.path and returns what code prints.
func importFrom(t *testing.T, dir, code string) string {
	out, err := exec.Command(python(t), "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "+code, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// C832: a set is resolved with its dependencies, installed read-only,
// importable; the same request again is a cache hit without uv.
func TestInstallThenHitC832(t *testing.T) {
	leakcheck.Check(t)
	uv, log := wheeltest.CountingUV(t)
	c := openCache(t, t.TempDir(), uv, wheeltest.Tiny(t), 0)
	l, err := c.Acquire(context.Background(), reqs(t, "tinya", "tinyb<2"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if !l.Installed {
		t.Error("first acquire says cached")
	}
	if got := importFrom(t, l.Dir, "import tinya; print(tinya.A)"); got != "a1b1.0" {
		t.Errorf("import: %q", got)
	}
	if err := os.WriteFile(filepath.Join(l.Dir, "tinya", "x.py"), nil, 0o644); err == nil && os.Geteuid() != 0 {
		t.Error("the set is writable")
	}
	st, _ := os.Stat(filepath.Join(l.Dir, "tinya", "__init__.py"))
	if st.Mode().Perm()&0o222 != 0 {
		t.Errorf("a set's file has mode %v", st.Mode())
	}
	l2, err := c.Acquire(context.Background(), reqs(t, "tinyb<2", "tinya"))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release()
	if l2.Installed || l2.Dir != l.Dir {
		t.Errorf("second acquire: installed %v, dir %s (first %s)", l2.Installed, l2.Dir, l.Dir)
	}
	// Another daemon on the same cache finds the set on disk.
	c2 := openCache(t, c.o.Root, uv, c.o.FindLinks[0], 0)
	l3, err := c2.Acquire(context.Background(), reqs(t, "tinya", "tinyb<2"))
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Release()
	if l3.Installed || l3.Dir != l.Dir || wheeltest.Installs(t, log) != 1 {
		t.Errorf("another daemon: installed %v, %d installs", l3.Installed, wheeltest.Installs(t, log))
	}
}

// C833: failures are one line that names the request and the cause: an
// unsatisfiable version, a name with only an sdist, a corrupted wheel.
func TestInstallFailuresC833(t *testing.T) {
	leakcheck.Check(t)
	dir := wheeltest.Tiny(t)
	if err := os.WriteFile(filepath.Join(dir, "onlysdist-1.0.tar.gz"), []byte("not even a tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken-1.0-py3-none-any.whl"), []byte("PK\x03\x04garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := openCache(t, t.TempDir(), wheeltest.UV(t), dir, 0)
	for req, want := range map[string]string{
		"tinyb>=3":  "tinyb",
		"onlysdist": "onlysdist",
		"broken":    "broken",
		"nosuchpkg": "nosuchpkg",
	} {
		_, err := c.Acquire(context.Background(), reqs(t, req))
		var ie *InstallError
		if !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an InstallError", req, err)
			continue
		}
		if strings.ContainsAny(ie.Msg, "\n\r") || !strings.Contains(ie.Msg, want) || len(ie.Msg) > 1100 {
			t.Errorf("%s: message %q", req, ie.Msg)
		}
		t.Logf("%s: %s", req, ie.Msg)
	}
	if entries, _ := os.ReadDir(c.SetsDir()); len(entries) != 0 {
		t.Errorf("a failure published %d sets", len(entries))
	}
	if entries, _ := os.ReadDir(filepath.Join(c.o.Root, dirStaging)); len(entries) != 0 {
		t.Errorf("a failure left %d staging entries", len(entries))
	}
}

// C834: runs racing for one set install it once; two daemons racing on
// one cache directory both get the one published set.
func TestRacingInstallsC834(t *testing.T) {
	leakcheck.Check(t)
	uv, log := wheeltest.CountingUV(t)
	root, dir := t.TempDir(), wheeltest.Tiny(t)
	caches := []*Cache{openCache(t, root, uv, dir, 0), openCache(t, root, uv, dir, 0)}
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	for i := range dirs {
		wg.Go(func() {
			l, err := caches[i%2].Acquire(context.Background(), reqs(t, "tinya"))
			if err != nil {
				t.Error(err)
				return
			}
			dirs[i] = l.Dir
			l.Release()
		})
	}
	wg.Wait()
	for _, d := range dirs {
		if d != dirs[0] {
			t.Errorf("racing runs got sets %s and %s", dirs[0], d)
		}
	}
	if n := wheeltest.Installs(t, log); n < 1 || n > 2 {
		t.Errorf("%d installations for one set in two daemons", n)
	}
	if entries, _ := os.ReadDir(caches[0].SetsDir()); len(entries) != 1 {
		t.Errorf("%d sets published", len(entries))
	}
}

// C835: eviction by size removes the least recently used set nobody
// holds, never one a run holds.
func TestEvictionSparesLeasedSetsC835(t *testing.T) {
	leakcheck.Check(t)
	links := wheeltest.Tiny(t)
	wheeltest.Write(t, links, wheeltest.Wheel{Name: "tinyc", Version: "1.0", Files: map[string]string{"tinyc/__init__.py": "C = 'c1.0'\n"}})
	// The bound: one and a half sets of one tiny package.
	probe := openCache(t, t.TempDir(), wheeltest.UV(t), links, 0)
	l, err := probe.Acquire(context.Background(), reqs(t, "tinyb==1.0"))
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	sets, size := probe.published()
	if len(sets) != 1 || size <= 0 {
		t.Fatalf("probe: %d sets, %d bytes", len(sets), size)
	}
	c := openCache(t, t.TempDir(), wheeltest.UV(t), links, size*3/2)
	held, err := c.Acquire(context.Background(), reqs(t, "tinyb==1.0"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Acquire(context.Background(), reqs(t, "tinyb==2.0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(held.Dir); err != nil {
		t.Fatalf("a held set was evicted: %v", err)
	}
	if got := importFrom(t, held.Dir, "import tinyb; print(tinyb.B)"); got != "b1.0" {
		t.Errorf("held set: %q", got)
	}
	held.Release()
	second.Release()
	third, err := c.Acquire(context.Background(), reqs(t, "tinyc"))
	if err != nil {
		t.Fatal(err)
	}
	defer third.Release()
	for _, d := range []string{held.Dir, second.Dir} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("released set %s survived eviction", d)
		}
	}
	// The evicted request is installed again when asked for.
	again, err := c.Acquire(context.Background(), reqs(t, "tinyb==1.0"))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if !again.Installed || importFrom(t, again.Dir, "import tinyb; print(tinyb.B)") != "b1.0" {
		t.Error("an evicted set was not installed again")
	}
}

// C847: daemons sharing a cache directory but not their sources never
// share a set: a wheel of the same name and version from another source
// (an attacker's find-links) is another set, and the set installed is the
// one whose wheels' digests were resolved.
func TestForeignSourceDoesNotPoisonC847(t *testing.T) {
	leakcheck.Check(t)
	root, good, evil := t.TempDir(), wheeltest.Tiny(t), t.TempDir()
	wheeltest.Write(t, evil, wheeltest.Wheel{Name: "tinyb", Version: "1.0",
		Files: map[string]string{"tinyb/__init__.py": "B = 'planted'\n"}})
	attacker := openCache(t, root, wheeltest.UV(t), evil, 0)
	l, err := attacker.Acquire(context.Background(), reqs(t, "tinyb==1.0"))
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	victim := openCache(t, root, wheeltest.UV(t), good, 0)
	v, err := victim.Acquire(context.Background(), reqs(t, "tinyb==1.0"))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if got := importFrom(t, v.Dir, "import tinyb; print(tinyb.B)"); got != "b1.0" {
		t.Errorf("the victim's run imports %q from %s", got, v.Dir)
	}
}

// C848: a hostile wheel cannot reach past its set: entries with "..", an
// absolute path or a .data path that climbs are not written outside it, a
// symbolic-link entry becomes a regular file (or the set is refused),
// nothing in a set is executable or writable, and a .pth file in it runs
// nothing when the set is on sys.path.
func TestHostileWheelStaysInItsSetC848(t *testing.T) {
	leakcheck.Check(t)
	links, outside := t.TempDir(), t.TempDir()
	planted := filepath.Join(outside, "absolute.py")
	wheeltest.Write(t, links, wheeltest.Wheel{Name: "hostile", Version: "1.0",
		Files: map[string]string{
			"hostile/__init__.py": "H = 1\n",
			"../../climbed.py":    "x = 1\n",
			planted:               "x = 1\n",
			"hostile-1.0.data/data/../../../datadot.py": "x = 1\n",
			"hostile-1.0.data/scripts/run.sh":           "#!/bin/sh\necho ran\n",
			"hostile.pth":                               "import os; open(" + strconv.Quote(filepath.Join(outside, "pth-ran")) + ", 'w')\n",
		},
		Links: map[string]string{"hostile/passwd": "/etc/passwd"}})
	root := t.TempDir()
	c := openCache(t, root, wheeltest.UV(t), links, 0)
	l, err := c.Acquire(context.Background(), reqs(t, "hostile"))
	var ie *InstallError
	if errors.As(err, &ie) {
		t.Logf("refused: %s", ie.Msg) // refusing the set is as good
	} else if err != nil {
		t.Fatal(err)
	} else {
		defer l.Release()
		if got := importFrom(t, l.Dir, "import hostile; print(hostile.H)"); got != "1" {
			t.Errorf("import: %q", got)
		}
		err := filepath.WalkDir(l.Dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := os.Lstat(path)
			if err != nil {
				return err
			}
			if info.Mode()&fs.ModeSymlink != 0 || info.Mode().Perm()&0o333 != 0 && !info.IsDir() || info.IsDir() && info.Mode().Perm()&0o222 != 0 {
				t.Errorf("%s: mode %v in a sealed set", path, info.Mode())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{root, links, outside, filepath.Dir(root)} {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && (d.Name() == "climbed.py" || d.Name() == "datadot.py" || path == planted || d.Name() == "pth-ran") {
				t.Errorf("the wheel reached %s", path)
			}
			return nil
		})
	}
}

// C849: what an installation leaves on disk is bounded by MaxBytes: a set
// larger than the whole bound is refused (nothing published), and uv keeps
// no cache of its own beside the sets.
func TestOversizedSetRefusedC849(t *testing.T) {
	leakcheck.Check(t)
	root := t.TempDir()
	c := openCache(t, root, wheeltest.UV(t), wheeltest.Tiny(t), 1)
	_, err := c.Acquire(context.Background(), reqs(t, "tinyb==1.0"))
	var ie *InstallError
	if !errors.As(err, &ie) || !strings.Contains(ie.Msg, "more than the package cache may hold") {
		t.Fatalf("an oversized set: %v", err)
	}
	var stray []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, path)
		if err == nil && !d.IsDir() && !strings.HasPrefix(rel, dirLocks+"/") && !strings.HasPrefix(rel, dirRequests+"/") {
			stray = append(stray, rel)
		}
		return nil
	})
	if len(stray) > 0 {
		t.Errorf("left in the cache: %q", stray)
	}
}

// C850 (optional): the real index. A tiny pure-Python wheel (six) is
// resolved and installed from PyPI; skipped when the index cannot be
// reached from this machine.
func TestRealIndexC850(t *testing.T) {
	leakcheck.Check(t)
	const index = "https://pypi.org/simple"
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(index + "/six/")
	if err != nil {
		t.Skipf("the index cannot be reached: %v", err)
	}
	resp.Body.Close()
	client.CloseIdleConnections()
	if resp.StatusCode != http.StatusOK {
		t.Skipf("the index answered %s", resp.Status)
	}
	allow, _ := ParseAllowList("six")
	c, err := Open(Options{UV: wheeltest.UV(t), Python: python(t), Root: t.TempDir(), Index: index, Allow: allow, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(context.Background(), reqs(t, "six==1.16.0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if got := importFrom(t, l.Dir, "import six; print(six.__version__)"); got != "1.16.0" {
		t.Errorf("six from the index: %q", got)
	}
}

// C851: an installation nobody waits for any more is stopped: a run
// cancelled while its set installs leaves no uv behind (a client could
// otherwise start installations and walk away, each running to its
// timeout).
func TestAbandonedInstallStoppedC851(t *testing.T) {
	leakcheck.Check(t)
	uv, started := wheeltest.HangingUV(t)
	c := openCache(t, t.TempDir(), uv, wheeltest.Tiny(t), 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, reqs(t, "tinya"))
		done <- err
	}()
	wheeltest.AwaitFile(t, started, done)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel: %v", err)
	}
	// leakcheck fails the test if the installation's process is still there.
}

// C852: what a daemon killed during an installation left in staging is
// removed when a cache is opened once it is older than an installation may
// take; a younger entry (another daemon's installation under way) stays.
func TestStaleStagingSweptC852(t *testing.T) {
	leakcheck.Check(t)
	root := t.TempDir()
	openCache(t, root, wheeltest.UV(t), t.TempDir(), 0)
	stale, fresh := filepath.Join(root, dirStaging, "install-stale"), filepath.Join(root, dirStaging, "install-fresh")
	for _, d := range []string{stale, fresh} {
		if err := os.MkdirAll(filepath.Join(d, "set", "pkg"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := seal(filepath.Join(d, "set")); err != nil { // as a crash after sealing leaves it
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-3 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	openCache(t, root, wheeltest.UV(t), t.TempDir(), 0)
	if _, err := os.Lstat(stale); err == nil {
		t.Error("a stale staging entry survived Open")
	}
	if _, err := os.Lstat(fresh); err != nil {
		t.Errorf("a fresh staging entry was removed: %v", err)
	}
}

// sourcelessPyc is bytecode that python's import loads from a .pyc file
// beside the modules (no source needed): code compiled from src.
func sourcelessPyc(t *testing.T, src string) string {
	out, err := exec.Command(python(t), "-I", "-c", "import importlib.util, marshal, sys; "+
		"sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(compile(sys.argv[1], 'planted', 'exec')))", src).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// C1070: the key covers every file the wheels install, bytecode included:
// a wheel from another source that adds only a .pyc (a module its package
// imports when present, as packages do for optional accelerators) is
// another set, so a victim sharing the cache never imports it.
func TestShippedBytecodeIsContentC1070(t *testing.T) {
	leakcheck.Check(t)
	root, good, evil := t.TempDir(), t.TempDir(), t.TempDir()
	files := map[string]string{"accel/__init__.py": "try:\n    from accel._speedups import MODE\nexcept ImportError:\n    MODE = 'pure'\n"}
	wheeltest.Write(t, good, wheeltest.Wheel{Name: "accel", Version: "1.0", Files: files})
	files["accel/_speedups.pyc"] = sourcelessPyc(t, "MODE = 'planted'")
	wheeltest.Write(t, evil, wheeltest.Wheel{Name: "accel", Version: "1.0", Files: files})
	attacker := openCache(t, root, wheeltest.UV(t), evil, 0)
	a, err := attacker.Acquire(context.Background(), reqs(t, "accel"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if got := importFrom(t, a.Dir, "import accel; print(accel.MODE)"); got != "planted" {
		t.Fatalf("the attacker's set imports %q: the planted bytecode is not installed, the test proves nothing", got)
	}
	victim := openCache(t, root, wheeltest.UV(t), good, 0)
	v, err := victim.Acquire(context.Background(), reqs(t, "accel"))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if got := importFrom(t, v.Dir, "import accel; print(accel.MODE)"); got != "pure" || v.Dir == a.Dir {
		t.Errorf("the victim's run imports %q from %s (the attacker's set: %s)", got, v.Dir, a.Dir)
	}
}

// C1071: a published set carries the bytecode of its sources, which a run
// imports as it is (read-only, nothing written or compiled at import), also
// when the sources are many (compiled by several interpreters at once); a
// source that does not compile does not fail the installation, and its
// import reports the error as the interpreter would.
func TestSetsCarryTheirBytecodeC1071(t *testing.T) {
	leakcheck.Check(t)
	links := t.TempDir()
	files := map[string]string{"many/broken.py": "def f(:\n"}
	var imports []string
	for i := range 2*sourcesPerCompiler + 10 {
		name := "m" + strconv.Itoa(i)
		files["many/"+name+".py"] = "X = " + strconv.Itoa(i) + "\n"
		imports = append(imports, "many."+name)
	}
	files["many/__init__.py"] = ""
	wheeltest.Write(t, links, wheeltest.Wheel{Name: "many", Version: "1.0", Files: files})
	c := openCache(t, t.TempDir(), wheeltest.UV(t), links, 0)
	l, err := c.Acquire(context.Background(), reqs(t, "many"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	cmd := exec.Command(python(t), "-I", "-v", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import "+strings.Join(imports, ", ")+"; print('X =', many.m7.X)", l.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\nX = 7\n") {
		t.Fatalf("import: %v: %.2000s", err, out)
	}
	fromBytecode := strings.Count(string(out), "# code object from '"+filepath.Join(l.Dir, "many", "__pycache__")+"/")
	if fromBytecode != len(imports)+1 { // and __init__
		t.Errorf("%d modules imported from the set's bytecode, want %d", fromBytecode, len(imports)+1)
	}
	for _, s := range []string{"# wrote", "# could not create", "# bytecode is stale"} {
		if strings.Contains(string(out), s) {
			t.Errorf("the import says %q", s)
		}
	}
	if got := importFrom(t, l.Dir, `exec("try: import many.broken\nexcept SyntaxError as e: print(type(e).__name__)")`); got != "SyntaxError" {
		t.Errorf("importing the broken module: %q", got)
	}
}

// C1072: compiling a hostile wheel's sources runs none of its code: a
// py_compile.py, sitecustomize.py or .pth file in the set does not shadow
// or extend the compiler's interpreter; a __pycache__ that is a file, or a
// .pyc path that is a folder, costs only that module's bytecode.
func TestCompilingRunsNothingOfTheSetC1072(t *testing.T) {
	leakcheck.Check(t)
	links, outside := t.TempDir(), t.TempDir()
	marker := "open(" + strconv.Quote(filepath.Join(outside, "ran")) + ", 'a').write(__name__)\n"
	wheeltest.Write(t, links, wheeltest.Wheel{Name: "shadow", Version: "1.0", Files: map[string]string{
		"py_compile.py":         marker,
		"sitecustomize.py":      marker,
		"importlib/__init__.py": marker,
		"shadow.pth":            "import os; " + marker,
		"shadow/__init__.py":    "S = 1\n",
		"blocked/__init__.py":   "B = 3\n",
		"blocked/__pycache__":   "a file where the folder goes\n",
		"folded/__init__.py":    "F = 4\n",
		"folded/__pycache__/__init__." + cacheTag(t) + ".pyc/x": "a folder where the bytecode goes\n",
	}})
	c := openCache(t, t.TempDir(), wheeltest.UV(t), links, 0)
	l, err := c.Acquire(context.Background(), reqs(t, "shadow"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if b, err := os.ReadFile(filepath.Join(outside, "ran")); err == nil {
		t.Errorf("the installation ran the set's code: %q", b)
	}
	if _, err := os.Stat(filepath.Join(l.Dir, "shadow", "__pycache__", "__init__."+cacheTag(t)+".pyc")); err != nil {
		t.Errorf("the set's bytecode: %v", err)
	}
	got := importFrom(t, l.Dir, "import shadow, blocked, folded; print(shadow.S, blocked.B, folded.F)")
	if got != "1 3 4" {
		t.Errorf("import: %q", got)
	}
}

// cacheTag is the interpreter's bytecode tag (cpython-311).
func cacheTag(t *testing.T) string {
	return importFrom(t, t.TempDir(), "print(sys.implementation.cache_tag)")
}

// C1073: an installation stopped while uv runs (its process group killed)
// leaves nothing outside the cache's staging folder, which its end clears:
// uv's working cache is not in the machine's temporary directory, where a
// killed uv left it for good.
func TestStoppedInstallLeavesNoTempC1073(t *testing.T) {
	leakcheck.Check(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	asked, release := make(chan struct{}, 1), make(chan struct{})
	links := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		select { // hold uv until it is killed
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer links.Close()
	defer close(release)
	root := t.TempDir()
	c := openCache(t, root, wheeltest.UV(t), links.URL, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, reqs(t, "tinya"))
		done <- err
	}()
	select {
	case <-asked:
	case err := <-done:
		t.Fatalf("uv ended before asking its find-links: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel: %v", err)
	}
	awaitEmpty(t, filepath.Join(root, dirStaging)) // the installation's last step, after Acquire returned
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("a stopped installation left %d entries in the temporary directory: %s…", len(left), left[0].Name())
	}
}

// awaitEmpty waits until dir holds nothing, failing the test after a minute.
func awaitEmpty(t *testing.T, dir string) {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		left, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still holds %s", dir, left[0].Name())
		}
	}
}

// C1074: a tool that fails without a word is named in the message: the
// bytecode compiler killed by a signal is not reported as uv's failure.
func TestSilentToolFailureNamesTheToolC1074(t *testing.T) {
	c := &Cache{}
	cmd := exec.Command("/usr/bin/python3.11")
	err := c.toolError(context.Background(), reqs(t, "tinya"), cmd, "compiling bytecode: ", &capped{}, errors.New("signal: killed"))
	if want := "packages tinya: compiling bytecode: python3.11 failed: signal: killed"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

// C1075: an installation stopped while its bytecode compiles (as when its
// daemon dies) publishes nothing, leaves no process and clears its staging
// folder; the next installation of the request publishes a complete set.
func TestStoppedDuringCompileC1075(t *testing.T) {
	leakcheck.Check(t)
	real, err := filepath.EvalSymlinks(importFrom(t, t.TempDir(), "print(sys.executable)"))
	if err != nil {
		t.Fatal(err)
	}
	// A python that, as the compiler (-I -S), takes its list of sources and then hangs.
	dir := t.TempDir()
	compiling, hanging := filepath.Join(dir, "compiling"), filepath.Join(dir, "python3")
	script := "#!/bin/sh\nif [ \"$2\" = -S ]; then cat >/dev/null; touch '" + compiling + "'; exec sleep 600; fi\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(hanging, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	root, links := t.TempDir(), wheeltest.Tiny(t)
	allow, _ := ParseAllowList("*")
	c, err := Open(Options{UV: wheeltest.UV(t), Python: hanging, Root: root, FindLinks: []string{links}, Allow: allow, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(root) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, reqs(t, "tinya"))
		done <- err
	}()
	wheeltest.AwaitFile(t, compiling, done)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel: %v", err)
	}
	awaitEmpty(t, filepath.Join(root, dirStaging))
	if sets, _ := os.ReadDir(c.SetsDir()); len(sets) > 0 {
		t.Fatalf("a set was published mid-compile: %s", sets[0].Name())
	}
	again := openCache(t, root, wheeltest.UV(t), links, 0)
	l, err := again.Acquire(context.Background(), reqs(t, "tinya"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := os.Stat(filepath.Join(l.Dir, "tinya", "__pycache__", "__init__."+cacheTag(t)+".pyc")); err != nil || !l.Installed {
		t.Errorf("the next installation: installed %v, bytecode %v", l.Installed, err)
	}
}

// C1230: only the installer's own notes that differ between installations
// are left out of the set's content, at the places the installer writes
// them: a data file a package reads that is named like one of them (RECORD,
// uv_cache.json, .lock) in the package's own folder, or a .lock at the set's
// root (uv's own is empty), or a second .dist-info folder's RECORD (placed
// through the wheel's .data/purelib) is content, so a wheel from another
// source that differs in it alone is another set.
func TestNotesOnlyWhereTheInstallerWritesThemC1230(t *testing.T) {
	leakcheck.Check(t)
	for _, path := range []string{"conf/RECORD", "conf/uv_cache.json", "conf/.lock", ".lock", "other-9.9.dist-info/RECORD"} {
		t.Run(path, func(t *testing.T) {
			root, good, evil := t.TempDir(), t.TempDir(), t.TempDir()
			code := "import os\nMODE = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), " + strconv.Quote(path) + ")).read()\n"
			inWheel := path
			if strings.Contains(path, ".dist-info/") {
				inWheel = "conf-1.0.data/purelib/" + path
			}
			wheeltest.Write(t, good, wheeltest.Wheel{Name: "conf", Version: "1.0",
				Files: map[string]string{"conf/__init__.py": code, inWheel: "pure"}})
			wheeltest.Write(t, evil, wheeltest.Wheel{Name: "conf", Version: "1.0",
				Files: map[string]string{"conf/__init__.py": code, inWheel: "planted"}})
			attacker := openCache(t, root, wheeltest.UV(t), evil, 0)
			a, err := attacker.Acquire(context.Background(), reqs(t, "conf"))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Release()
			if got := importFrom(t, a.Dir, "import conf; print(conf.MODE)"); got != "planted" {
				t.Fatalf("the attacker's set imports %q: the test proves nothing", got)
			}
			victim := openCache(t, root, wheeltest.UV(t), good, 0)
			v, err := victim.Acquire(context.Background(), reqs(t, "conf"))
			if err != nil {
				t.Fatal(err)
			}
			defer v.Release()
			if got := importFrom(t, v.Dir, "import conf; print(conf.MODE)"); got != "pure" || v.Dir == a.Dir {
				t.Errorf("the victim's run imports %q from %s (the attacker's set: %s)", got, v.Dir, a.Dir)
			}
		})
	}
}

// C1231: a source that does not compile is left without bytecode, also when
// its wheel ships some: bytecode that its import would load without looking
// at the source (hash-based, unchecked) beside a source with a syntax error
// is not what the import runs; it reports the source's error.
func TestShippedBytecodeOfABrokenSourceIsNotImportedC1231(t *testing.T) {
	leakcheck.Check(t)
	links := t.TempDir()
	wheeltest.Write(t, links, wheeltest.Wheel{Name: "stale", Version: "1.0", Files: map[string]string{
		"stale/__init__.py": "def f(:\n",
		"stale/__pycache__/__init__." + cacheTag(t) + ".pyc": uncheckedPyc(t, "X = 'shipped'"),
	}})
	c := openCache(t, t.TempDir(), wheeltest.UV(t), links, 0)
	l, err := c.Acquire(context.Background(), reqs(t, "stale"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	got := importFrom(t, l.Dir, `exec("try:\n import stale\n print(stale.X)\nexcept SyntaxError as e: print(type(e).__name__)")`)
	if got != "SyntaxError" {
		t.Errorf("importing the broken package: %q", got)
	}
}

// uncheckedPyc is bytecode compiled from src in a .pyc whose import trusts
// it without reading the source beside it (hash-based, check_source unset).
func uncheckedPyc(t *testing.T, src string) string {
	out, err := exec.Command(python(t), "-I", "-c", "import importlib.util, marshal, sys; "+
		"sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER + (1).to_bytes(4, 'little') + bytes(8) + marshal.dumps(compile(sys.argv[1], 'planted', 'exec')))", src).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// C1233: a compiler gets no more memory than a run importing the set would:
// a source whose compilation needs more than the bound (a one-megabyte list
// literal takes the parser hundreds of megabytes) is left without bytecode,
// the installation succeeds and the compiler goes on with the sources after it.
func TestCompilerMemoryBoundC1233(t *testing.T) {
	leakcheck.Check(t)
	links, root := t.TempDir(), t.TempDir()
	wheeltest.Write(t, links, wheeltest.Wheel{Name: "huge", Version: "1.0", Files: map[string]string{
		"huge/__init__.py": "",
		"huge/literal.py":  "X = [" + strings.Repeat("1,", 500_000) + "]\n",
		"huge/small.py":    "S = 1\n",
	}})
	allow, _ := ParseAllowList("*")
	c, err := Open(Options{UV: wheeltest.UV(t), Python: python(t), Root: root, FindLinks: []string{links},
		Allow: allow, Timeout: 2 * time.Minute, AddressSpace: 128 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(root) })
	l, err := c.Acquire(context.Background(), reqs(t, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	tag := cacheTag(t)
	pyc := func(name string) string {
		return filepath.Join(l.Dir, "huge", "__pycache__", name+"."+tag+".pyc")
	}
	if _, err := os.Stat(pyc("literal")); err == nil {
		t.Errorf("the literal was compiled past the compiler's 128 MiB")
	}
	if _, err := os.Stat(pyc("small")); err != nil {
		t.Errorf("the source after it: %v", err)
	}
}

// C1237: the compiler's list holds any name a wheel may carry: sources named
// with a leading dash, a space, a backslash or non-ASCII letters are each
// compiled; a name with a control character (a line end among them) is
// refused by uv, and the installation fails with one line naming the set.
func TestOddSourceNamesC1237(t *testing.T) {
	leakcheck.Check(t)
	links := t.TempDir()
	names := []string{"-x", "sp ace", `a\b`, "ü"}
	files := map[string]string{"odd/__init__.py": ""}
	for _, n := range names {
		files["odd/"+n+".py"] = "X = 1\n"
	}
	wheeltest.Write(t, links, wheeltest.Wheel{Name: "odd", Version: "1.0", Files: files})
	wheeltest.Write(t, links, wheeltest.Wheel{Name: "linebreak", Version: "1.0", Files: map[string]string{"linebreak/a\nb.py": "X = 1\n"}})
	c := openCache(t, t.TempDir(), wheeltest.UV(t), links, 0)
	l, err := c.Acquire(context.Background(), reqs(t, "odd"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	tag := cacheTag(t)
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(l.Dir, "odd", "__pycache__", n+"."+tag+".pyc")); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	_, err = c.Acquire(context.Background(), reqs(t, "linebreak"))
	var ie *InstallError
	if !errors.As(err, &ie) || strings.Contains(ie.Msg, "\n") || !strings.Contains(ie.Msg, "linebreak") {
		t.Errorf("a line end in a source's name: %v", err)
	}
}

// C1238: the daemon reads a distribution's RECORD whole to drop uv's note
// from it, within a bound: a wheel that plants a RECORD of more than
// maxRecordBytes (through its .data/purelib, compressed to kilobytes) is
// refused in one line instead of read into the daemon's memory.
func TestPlantedHugeRecordRefusedC1238(t *testing.T) {
	leakcheck.Check(t)
	links := t.TempDir()
	wheeltest.Write(t, links, wheeltest.Wheel{Name: "fat", Version: "1.0", Files: map[string]string{
		"fat/__init__.py": "",
		"fat-1.0.data/purelib/other-9.9.dist-info/RECORD": strings.Repeat("x", maxRecordBytes+1),
	}})
	c := openCache(t, t.TempDir(), wheeltest.UV(t), links, 0)
	_, err := c.Acquire(context.Background(), reqs(t, "fat"))
	var ie *InstallError
	if !errors.As(err, &ie) || !strings.Contains(ie.Msg, "other-9.9.dist-info/RECORD is larger than") {
		t.Errorf("a planted RECORD of %d bytes: %v", maxRecordBytes+1, err)
	}
}

// C1240: bytecode cannot take the cache past its bound on the way: a source
// whose constants fold into a .pyc three hundred times its size (4 000 lines
// of x = "…" * n make 16 MB) stops the compilers once the set's bytecode
// passes what the cache may hold, before the next such source is written,
// and the installation is refused saying so.
func TestBytecodeWithinTheCacheBoundC1240(t *testing.T) {
	leakcheck.Check(t)
	links := t.TempDir()
	var src strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&src, "x = %q * 2048\n", strconv.FormatInt(int64(i), 36))
	}
	files := map[string]string{"amp/__init__.py": ""}
	for i := range 4 {
		files["amp/m"+strconv.Itoa(i)+".py"] = src.String()
	}
	wheeltest.Write(t, links, wheeltest.Wheel{Name: "amp", Version: "1.0", Files: files})
	c := openCache(t, t.TempDir(), wheeltest.UV(t), links, 8<<20)
	_, err := c.Acquire(context.Background(), reqs(t, "amp"))
	var ie *InstallError
	if !errors.As(err, &ie) || !strings.Contains(ie.Msg, "compiling bytecode: the bytecode passed the 8") {
		t.Errorf("a set whose bytecode passes the cache's bound: %v", err)
	}
}
