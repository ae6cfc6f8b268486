//go:build linux

package rundir

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Suite(m)) }

// recorder is a spawn.Watcher that records directory registrations.
type recorder struct {
	mu      sync.Mutex
	watched []string
	dropped []string
}

func (r *recorder) Watch(int, uint64) {}
func (r *recorder) Unwatch(int)       {}
func (r *recorder) WatchDir(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watched = append(r.watched, p)
}
func (r *recorder) UnwatchDir(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropped = append(r.dropped, p)
}

// TestCreateInAHome: Create makes a 0700 directory with an opaque name in
// this process's home in the parent, which carries this process's owner
// record and has an opaque name too; both are registered, and Remove
// removes the directory and, with the last one, the home, unregistering
// each once gone (C764).
func TestCreateInAHome(t *testing.T) {
	rec := &recorder{}
	if !spawn.SetWatcher(rec) {
		t.Fatal("a watcher is installed already")
	}
	defer spawn.ClearWatcher(rec)
	parent := t.TempDir()
	old := unix.Umask(0o077)
	dir, err := Create(parent)
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Dir(dir)
	opaque := regexp.MustCompile(`^coderun-[a-z2-7]{26}$`)
	if filepath.Dir(home) != parent || !opaque.MatchString(filepath.Base(home)) || !opaque.MatchString(filepath.Base(dir)) {
		t.Errorf("Create made %s in %s, want %s/coderun-<random>/coderun-<random>", dir, parent, parent)
	}
	for _, d := range []string{home, dir} {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v, %v", d, fi.Mode(), err)
		}
	}
	o, ok := readOwner(parent, filepath.Base(home))
	start, _ := spawn.StartTime(os.Getpid())
	ns, _ := pidNamespace("self")
	if want := (owner{os.Getpid(), start, ns}); !ok || o != want || o.gone() {
		t.Errorf("owner record %+v (%v), want %+v, alive", o, ok, want)
	}
	second, err := Create(parent)
	if err != nil || filepath.Dir(second) != home {
		t.Fatalf("a second Create: %s, %v; want it in %s", second, err, home)
	}
	nested, err := Create(dir)
	if err != nil || filepath.Dir(nested) != dir {
		t.Fatalf("Create inside a directory of a home: %s, %v; want it in %s", nested, err, dir)
	}
	if !slices.Equal(rec.watched, []string{home, dir, second, nested}) || len(rec.dropped) != 0 {
		t.Errorf("after Create: watched %v, dropped %v", rec.watched, rec.dropped)
	}
	for _, d := range []string{second, dir} {
		if err := Remove(d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(home); !os.IsNotExist(err) {
		t.Errorf("after the last Remove, the home: %v", err)
	}
	if err := Remove(dir); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
	if !slices.Equal(rec.dropped, []string{second, dir, home, dir}) {
		t.Errorf("after Remove: dropped %v", rec.dropped)
	}
	again, err := Create(parent)
	if err != nil || filepath.Dir(again) != home {
		t.Errorf("Create after the home was removed: %s, %v; want it in %s again", again, err, home)
	}
	Remove(again)
}

func TestParseOwner(t *testing.T) {
	cases := []struct {
		record string
		want   owner
		ok     bool
	}{
		{"12 345 4026531836\n", owner{12, 345, 4026531836}, true},
		{"1 0 0\n", owner{1, 0, 0}, true},
		{"12 345 4026531836", owner{}, false}, // no newline: cut short
		{"12 345\n", owner{}, false},
		{"12 345 4026531836 9\n", owner{}, false},
		{"12  345 4026531836\n", owner{}, false},
		{"0 345 4026531836\n", owner{}, false},
		{"4194305 1 1\n", owner{}, false}, // above PID_MAX_LIMIT
		{"-12 345 1\n", owner{}, false},
		{"+12 345 1\n", owner{}, false},
		{"12 34x 1\n", owner{}, false},
		{"12 99999999999999999999 1\n", owner{}, false},
		{"", owner{}, false},
	}
	for _, c := range cases {
		if got, ok := parseOwner(c.record); got != c.want || ok != c.ok {
			t.Errorf("parseOwner(%q) = %+v, %v; want %+v, %v", c.record, got, ok, c.want, c.ok)
		}
	}
}

// deadOwner is the owner of a process that has ended (and been reaped).
func deadOwner(t *testing.T) owner {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, ok := spawn.StartTime(cmd.Process.Pid) // unreaped: still there
	cmd.Wait()
	if !ok {
		t.Fatal("no start time for a child")
	}
	me, _ := self()
	return owner{cmd.Process.Pid, start, me.pidns}
}

// TestSweep: Sweep removes the directories of owners that are gone (dead, or
// pid reused) and only those: never a live owner's (this process's, or
// another's), one from another pid namespace, one whose name names no
// owner, another user's, or anything that is not a directory.
func TestSweep(t *testing.T) {
	parent := t.TempDir()
	me, ok := self()
	if !ok {
		t.Fatal("no owner for this process")
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	sleeperStart, _ := spawn.StartTime(sleeper.Process.Pid)
	dead := deadOwner(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}

	mine, err := Create(parent)
	if err != nil {
		t.Fatal(err)
	}
	mkdir := func(o owner, random string) string { // a home of o's
		dir := filepath.Join(parent, Prefix+random)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ownerFile), o.record(), 0o400); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	gone := []string{
		mkdir(dead, "1"),
		mkdir(owner{me.pid, me.start + 1, me.pidns}, "2"), // this pid, another start: reused
	}
	hostile := mkdir(dead, "3") // what a program may leave: a link out, read-only folders
	os.Symlink(outside, filepath.Join(hostile, "link"))
	os.Symlink(secret, filepath.Join(hostile, "file-link"))
	os.MkdirAll(filepath.Join(hostile, "ro", "deeper"), 0o700)
	os.WriteFile(filepath.Join(hostile, "ro", "deeper", "f"), nil, 0o400)
	os.Chmod(filepath.Join(hostile, "ro", "deeper"), 0o500)
	os.Chmod(filepath.Join(hostile, "ro"), 0)
	gone = append(gone, hostile)
	kept := []string{
		filepath.Dir(mine),
		mkdir(owner{sleeper.Process.Pid, sleeperStart, me.pidns}, "4"), // another live daemon
		mkdir(owner{dead.pid, dead.start, me.pidns + 1}, "5"),          // another namespace
		filepath.Join(parent, "coderun-123456789"),                     // no owner record
		filepath.Join(parent, "other-dir"),
	}
	os.Mkdir(kept[3], 0o700)
	os.Mkdir(kept[4], 0o700)
	link := filepath.Join(parent, Prefix+"6") // a link to a dead owner's home elsewhere
	target := filepath.Join(outside, "home")
	os.Mkdir(target, 0o700)
	os.WriteFile(filepath.Join(target, ownerFile), dead.record(), 0o400)
	os.Symlink(target, link)
	kept = append(kept, link)
	if others := mkdir(dead, "7"); os.Lchown(others, os.Geteuid()+1, -1) == nil { // only root may give it away
		kept = append(kept, others) // another user's
	} else {
		gone = append(gone, others)
	}

	removed, err := Sweep(parent)
	if err != nil || removed != len(gone) {
		t.Errorf("Sweep = %d, %v; want %d, nil", removed, err, len(gone))
	}
	for _, dir := range gone {
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: not swept (%v)", filepath.Base(dir), err)
		}
	}
	for _, dir := range kept {
		if _, err := os.Lstat(dir); err != nil {
			t.Errorf("%s: swept (%v)", filepath.Base(dir), err)
		}
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "keep" {
		t.Errorf("a file behind a link: %q, %v", b, err)
	}
	Remove(mine)
}

// TestRemoveTree: RemoveTree removes what a program may leave behind —
// read-only and unreadable folders, files still open, deep trees — and never
// anything a symbolic link inside points to; a path already gone is no
// error, and a link given as the path is removed as a link.
func TestRemoveTree(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte("keep"), 0o400)
	dir := filepath.Join(t.TempDir(), "coderun-tree")
	deep := dir
	for i := range 50 {
		deep = filepath.Join(deep, "d"+strconv.Itoa(i))
	}
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	open, err := os.Create(filepath.Join(deep, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	os.Symlink(outside, filepath.Join(dir, "dir-link"))
	os.Symlink(secret, filepath.Join(deep, "file-link"))
	os.Symlink("/", filepath.Join(deep, "root-link"))
	for _, mode := range []os.FileMode{0o500, 0o300, 0o100, 0} {
		sub := filepath.Join(dir, "mode"+strconv.FormatUint(uint64(mode), 8))
		os.MkdirAll(filepath.Join(sub, "inner"), 0o700)
		os.WriteFile(filepath.Join(sub, "inner", "f"), []byte("x"), 0o400)
		os.Chmod(filepath.Join(sub, "inner"), mode)
		os.Chmod(sub, mode)
	}
	os.Chmod(filepath.Join(deep, ".."), 0o500)

	if err := RemoveTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", dir, err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "keep" {
		t.Errorf("the file a link pointed to: %q, %v", b, err)
	}
	if err := RemoveTree(dir); err != nil {
		t.Errorf("removing it again: %v", err)
	}
	link := filepath.Join(t.TempDir(), "coderun-link")
	os.Symlink(outside, link)
	if err := RemoveTree(link); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("the link is still there: %v", err)
	}
	if _, err := os.Stat(secret); err != nil {
		t.Errorf("removing a link removed its target's contents: %v", err)
	}
}
