package config

import (
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/coderun-rpc/coderun-rpc/wheelset"
)

// Packages on demand (docs/packages.md): the allow-list, where wheels come
// from, the cache and uv. Allow's zero value is the feature off.
type Packages struct {
	Allow     wheelset.AllowList
	Index     string   // "" for none
	FindLinks []string // directories or URLs
	CacheDir  string
	CacheMB   int64
	// UV is uv's absolute path, located by Load when the feature is on
	// ("" while it is off).
	UV string
	// Cache is the opened cache when the feature is on (nil while off).
	Cache *wheelset.Cache
}

// installTimeout bounds one resolution and installation of a package set.
const installTimeout = 5 * time.Minute

// openPackageCache opens (makes) the cache when packages are on, for the
// probed interpreter: a cache directory the daemon cannot own is a
// configuration error naming CODERUN_PACKAGE_CACHE_DIR.
func openPackageCache(c *Config) error {
	p := &c.Packages
	if !p.Allow.Enabled() {
		return nil
	}
	if p.CacheDir == "" {
		return &Error{Var: VarPackageCacheDir, Value: "", Rule: "must be set (" + VarPackages + " is set, and neither $XDG_CACHE_HOME nor $HOME gives a default)"}
	}
	cache, err := wheelset.Open(wheelset.Options{UV: p.UV, Python: c.Python, Root: p.CacheDir, Index: p.Index,
		FindLinks: p.FindLinks, MaxBytes: p.CacheMB << 20, Allow: p.Allow, Timeout: installTimeout,
		AddressSpace: c.Limits.AddressSpaceMb << 20})
	if err != nil {
		return &Error{Var: VarPackageCacheDir, Value: p.CacheDir, Rule: err.Error()}
	}
	p.Cache = cache
	return nil
}

// Packages' variables.
const (
	VarPackages           = "CODERUN_PACKAGES"
	VarPackageIndex       = "CODERUN_PACKAGE_INDEX"
	VarPackageFindLinks   = "CODERUN_PACKAGE_FIND_LINKS"
	VarPackageCacheDir    = "CODERUN_PACKAGE_CACHE_DIR"
	VarPackageCacheMB     = "CODERUN_PACKAGE_CACHE_MB"
	VarUVBin              = "CODERUN_UV_BIN"
	defaultPackageIndex   = "https://pypi.org/simple"
	packageCacheSubdir    = "coderun-rpc/packages"
	packageCacheMBCeiling = 1 << 30
)

// packageRows are the table's rows for packages on demand.
var packageRows = []variable{
	{name: VarPackages, def: "none", note: "; packages a run may ask for: names with optional version ranges, or *",
		defaultOf: func(*Config, Options) string { return "" },
		rule:      allowRule{},
		set: func(c *Config, text string, _ int64) {
			c.Packages.Allow, _ = wheelset.ParseAllowList(text) // the rule parsed it
		}},
	{name: VarPackageIndex, def: defaultPackageIndex, note: "; the index uv installs from (none: find-links only)",
		rule: indexRule{},
		set: func(c *Config, text string, _ int64) {
			if text != "none" {
				c.Packages.Index = text
			}
		}},
	{name: VarPackageFindLinks, def: "none", note: "; comma-separated directories or URLs of wheels",
		defaultOf: func(*Config, Options) string { return "" },
		rule:      findLinksRule{},
		set:       func(c *Config, text string, _ int64) { c.Packages.FindLinks = splitList(text) }},
	{name: VarPackageCacheDir, def: "$XDG_CACHE_HOME/" + packageCacheSubdir, note: "; installed package sets (shareable by one user's daemons)",
		defaultOf: func(*Config, Options) string {
			if d, err := os.UserCacheDir(); err == nil {
				return filepath.Join(d, packageCacheSubdir)
			}
			return ""
		},
		rule: cacheDirRule{},
		set:  func(c *Config, text string, _ int64) { c.Packages.CacheDir = text }},
	{name: VarPackageCacheMB, def: "2048", note: "; installed package sets kept on disk (least recently used evicted)",
		rule: positive(packageCacheMBCeiling, ""),
		set:  func(c *Config, _ string, n int64) { c.Packages.CacheMB = n }},
	{name: VarUVBin, def: "uv", note: " (on PATH unless a path); installs packages",
		rule: uvRule{},
		set:  func(c *Config, text string, _ int64) { c.Packages.UV = text }},
}

type allowRule struct{}

func (allowRule) parse(text string) (int64, error) {
	_, err := wheelset.ParseAllowList(text)
	return 0, err
}

func (allowRule) summary() string {
	return "comma-separated package names (PEP 508, optional versions) or *"
}

type indexRule struct{}

func (indexRule) parse(text string) (int64, error) {
	if text == "none" || isHTTPURL(text) {
		return 0, nil
	}
	return 0, errors.New("must be an http(s) URL or none")
}

func (indexRule) summary() string { return "http(s) URL or none" }

type findLinksRule struct{}

func (findLinksRule) parse(text string) (int64, error) {
	for _, f := range splitList(text) {
		if !isHTTPURL(f) && !filepath.IsAbs(f) {
			return 0, errors.New("each entry must be an absolute directory or an http(s) URL")
		}
	}
	return 0, nil
}

func (findLinksRule) summary() string { return "comma-separated paths or URLs" }

type cacheDirRule struct{}

// parse admits "" (no $XDG_CACHE_HOME nor $HOME to default to): only a
// daemon with packages on needs the directory (openPackageCache).
func (cacheDirRule) parse(text string) (int64, error) {
	if text != "" && !filepath.IsAbs(text) {
		return 0, errors.New("must be an absolute path")
	}
	return 0, nil
}

func (cacheDirRule) summary() string { return "absolute path" }

type uvRule struct{}

func (uvRule) parse(text string) (int64, error) {
	if text == "" {
		return 0, errors.New("must name the uv binary")
	}
	return 0, nil
}

func (uvRule) summary() string { return "path or command name" }

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func splitList(text string) []string {
	var out []string
	for _, p := range strings.Split(text, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// locateUV resolves CODERUN_UV_BIN when packages are on: a missing uv is a
// configuration error then, and never looked for while the feature is off.
func locateUV(c *Config) error {
	if !c.Packages.Allow.Enabled() {
		c.Packages.UV = ""
		return nil
	}
	text := c.Packages.UV
	abs, err := exec.LookPath(text)
	if err == nil {
		abs, err = filepath.Abs(abs)
	}
	if err != nil {
		return &Error{Var: VarUVBin, Value: text, Rule: "must name an executable uv (" + VarPackages + " is set): " + err.Error()}
	}
	c.Packages.UV = abs
	return nil
}
