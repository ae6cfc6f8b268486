//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A tree that holds the daemon's executable (a wheel's site-packages) is
// granted in parts: everything but the executable, no symbolic link (a rule
// through a link would grant its target).
func TestCarve(t *testing.T) {
	site := t.TempDir()
	for _, d := range []string{"pkg_a", "coderun/bin"} {
		if err := os.MkdirAll(filepath.Join(site, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"pkg_b.py", "pkg_a/__init__.py", "coderun/__init__.py", "coderun/bin/coderun-rpc", "coderun/bin/other"} {
		if err := os.WriteFile(filepath.Join(site, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(site, "link")); err != nil {
		t.Fatal(err)
	}
	read, list := Carve([]string{site, "/usr/lib/python3.11"}, []string{filepath.Join(site, "coderun/bin/coderun-rpc")})
	want := []string{filepath.Join(site, "coderun/__init__.py"), filepath.Join(site, "coderun/bin/other"),
		filepath.Join(site, "pkg_a"), filepath.Join(site, "pkg_b.py"), "/usr/lib/python3.11"}
	if !slices.Equal(read, want) {
		t.Errorf("read = %v\nwant %v", read, want)
	}
	if want := []string{site, filepath.Join(site, "coderun"), filepath.Join(site, "coderun/bin")}; !slices.Equal(list, want) {
		t.Errorf("list = %v\nwant %v", list, want)
	}
	if read, list := Carve([]string{site}, []string{site}); len(read)+len(list) != 0 {
		t.Errorf("a private tree itself is granted: %v %v", read, list)
	}
}
