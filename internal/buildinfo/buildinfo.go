// Package buildinfo owns the daemon's version and commit: stamped by the
// release build with -ldflags -X, otherwise read from the build information
// the Go toolchain embeds (runtime/debug), so a plain `go build` still says
// which commit it was built from when the toolchain recorded one.
package buildinfo

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// Set by release builds:
//
//	-ldflags "-X github.com/coderun-rpc/coderun-rpc/internal/buildinfo.version=0.1.0
//	          -X github.com/coderun-rpc/coderun-rpc/internal/buildinfo.commit=<sha>"
var (
	version string
	commit  string
)

// devVersion is reported by a build that was not stamped and whose module
// version names no release: "(devel)", or a pseudo-version the toolchain
// derived from an untagged commit (the commit is reported on its own).
const devVersion = "0.1.0-dev"

// pseudoVersion matches the tail of a Go pseudo-version: a 14-digit UTC
// timestamp and a 12-hex-digit commit prefix, as in
// v0.0.0-20261203100015-ffb3b494c24e, optionally +dirty.
var pseudoVersion = regexp.MustCompile(`\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// Version is the version alone ("0.1.0", or "0.1.0-dev" for an unstamped
// build of an untagged commit): what initialize reports as serverInfo.version.
func Version() string {
	info, _ := debug.ReadBuildInfo()
	v, _ := resolve(version, commit, info)
	return v
}

// String is "<version> (commit <commit>)", the one line `--version` prints
// after the program name, and the header of --help and --check.
func String() string {
	info, _ := debug.ReadBuildInfo()
	v, c := resolve(version, commit, info)
	return v + " (commit " + c + ")"
}

// resolve prefers the stamped values, then the build information, then
// placeholders; info may be nil (a binary built without module support).
func resolve(stampedVersion, stampedCommit string, info *debug.BuildInfo) (v, c string) {
	v, c = stampedVersion, stampedCommit
	if v == "" {
		v = devVersion
		if mv := moduleVersion(info); mv != "" {
			v = mv
		}
	}
	if c == "" {
		c = vcsCommit(info)
	}
	return v, c
}

// moduleVersion is the release the toolchain found for the main module (a
// tag such as v1.2.3, from Go 1.24 on), without the "v"; "" when it found none.
func moduleVersion(info *debug.BuildInfo) string {
	if info == nil {
		return ""
	}
	mv := info.Main.Version
	if mv == "" || mv == "(devel)" || pseudoVersion.MatchString(mv) {
		return ""
	}
	return strings.TrimPrefix(mv, "v")
}

// vcsCommit is the vcs.revision setting, marked "-dirty" when the tree had
// uncommitted changes, or "unknown" when the toolchain recorded none (for
// example under -buildvcs=false).
func vcsCommit(info *debug.BuildInfo) string {
	if info == nil {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
