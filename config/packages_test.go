package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// badPackageValues are TestEveryVariableValidated's bad values for the
// packages' variables.
var badPackageValues = map[string]string{
	VarPackages: "x @ https://evil.example/x.whl", VarPackageIndex: "ftp://index.example/simple",
	VarPackageFindLinks: "relative/wheels", VarPackageCacheDir: "cache", VarPackageCacheMB: "0", VarUVBin: "",
}

// C836: packages on demand are off by default and need no uv then; on,
// uv is located (a missing one is a configuration error naming
// CODERUN_UV_BIN) and the sources are read.
func TestPackagesConfigC836(t *testing.T) {
	c, err := load(t, map[string]string{VarUVBin: "/nonexistent/uv"})
	if err != nil || c.Packages.Allow.Enabled() || c.Packages.UV != "" || c.Packages.Index != defaultPackageIndex {
		t.Fatalf("off: %v %+v", err, c.Packages)
	}
	_, err = load(t, map[string]string{VarPackages: "numpy", VarUVBin: "/nonexistent/uv"})
	var ce *Error
	if !errors.As(err, &ce) || ce.Var != VarUVBin || !strings.Contains(ce.Rule, "must name an executable uv") {
		t.Fatalf("on without uv: %v", err)
	}
	cacheDir := t.TempDir()
	c, err = load(t, map[string]string{VarPackages: "numpy>=1.26,<2,tiny", VarUVBin: "sh",
		VarPackageIndex: "none", VarPackageFindLinks: "/w1, https://wheels.example/", VarPackageCacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Packages
	if !p.Allow.Allows("numpy") || !p.Allow.Allows("tiny") || !filepath.IsAbs(p.UV) || p.Index != "" ||
		strings.Join(p.FindLinks, " ") != "/w1 https://wheels.example/" || p.CacheDir != cacheDir || p.Cache == nil || p.CacheMB != 2048 {
		t.Errorf("on: %+v", p)
	}
}

// C854: without $HOME and $XDG_CACHE_HOME (a bare service environment) the
// cache directory has no default: a daemon with packages off starts, one
// with packages on is refused naming CODERUN_PACKAGE_CACHE_DIR.
func TestPackageCacheDirWithoutHomeC854(t *testing.T) {
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	if _, err := load(t, nil); err != nil {
		t.Errorf("packages off, no HOME: %v", err)
	}
	_, err := load(t, map[string]string{VarPackages: "tiny", VarUVBin: "sh"})
	var ce *Error
	if !errors.As(err, &ce) || ce.Var != VarPackageCacheDir || !strings.Contains(ce.Rule, "must be set") {
		t.Errorf("packages on, no HOME: %v", err)
	}
}
