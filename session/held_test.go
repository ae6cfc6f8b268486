package session

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// The held directory sees out/ as resetOut and collectOut would by path: an
// empty 0700 folder is kept as it is; anything else (an entry, another mode,
// a link to an empty folder, a file) is reset; a collection finds an empty
// folder empty whatever its mode.
func TestHeldOut(t *testing.T) {
	leakcheck.Check(t)
	wd, dir := madeDir(t)
	out := filepath.Join(dir, protocol.OutDir)
	h := openHeld(&worker{dir: dir, wd: wd}, os.Getpid())
	defer h.close()
	cases := []struct {
		name         string
		make         func()
		empty, plain bool
	}{
		{"empty 0700", func() { os.Mkdir(out, 0o700) }, true, true},
		{"an entry", func() { os.Mkdir(out, 0o700); os.WriteFile(filepath.Join(out, "f"), nil, 0o600) }, false, true},
		{"mode 0755", func() { os.Mkdir(out, 0o700); os.Chmod(out, 0o755) }, true, false},
		{"sticky", func() { os.Mkdir(out, 0o700); os.Chmod(out, 0o700|os.ModeSticky) }, true, false},
		{"a link to an empty folder", func() { os.Mkdir(filepath.Join(dir, "e"), 0o700); os.Symlink("e", out) }, false, false},
		{"a file", func() { os.WriteFile(out, nil, 0o600) }, false, false},
		{"missing", func() {}, false, false},
	}
	for _, c := range cases {
		os.RemoveAll(out)
		os.RemoveAll(filepath.Join(dir, "e"))
		c.make()
		if empty, plain := h.outState(); empty != c.empty || empty && plain != c.plain {
			t.Errorf("%s: outState = %v, %v; want %v, %v", c.name, empty, plain, c.empty, c.plain)
		}
		if got := h.outEmpty(h.w); got != c.empty {
			t.Errorf("%s: outEmpty = %v", c.name, got)
		}
		if err := h.resetOut(); err != nil {
			t.Fatalf("%s: resetOut: %v", c.name, err)
		}
		if st, err := os.Lstat(out); err != nil || st.Mode() != os.ModeDir|0o700 {
			t.Errorf("%s: after resetOut out/ is %v (%v)", c.name, st.Mode(), err)
		}
		if des, _ := os.ReadDir(out); len(des) != 0 {
			t.Errorf("%s: after resetOut out/ holds %d entries", c.name, len(des))
		}
	}
	if h.outEmpty(&worker{dir: dir}) {
		t.Error("outEmpty answered for a child that is not the session's")
	}
}

// The held /proc files read what a read by path does, again and again, and
// after close the reads go by path.
func TestHeldProc(t *testing.T) {
	leakcheck.Check(t)
	wd, dir := madeDir(t)
	h := openHeld(&worker{dir: dir, wd: wd}, os.Getpid())
	for range 2 {
		cpu, hwm, ok := h.usage(true)
		pcpu, phwm, pok := treeUsage(os.Getpid(), true)
		if !ok || !pok || hwm <= 0 || cpu > pcpu || hwm > phwm {
			t.Fatalf("held usage %v %d %v, by path %v %d %v", cpu, hwm, ok, pcpu, phwm, pok)
		}
	}
	h.close()
	h.close()
	if _, _, ok := h.usage(false); !ok {
		t.Error("usage after close failed")
	}
}
