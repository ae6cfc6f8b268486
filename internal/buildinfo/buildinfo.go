// Package buildinfo owns the daemon's version and commit: stamped by the
// release build with -ldflags -X, otherwise read from the build information
// the Go toolchain embeds (runtime/debug), so a plain `go build` still says
// which commit it was built from when the toolchain recorded one.
package buildinfo

import (
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
// version the toolchain left as "(devel)".
const devVersion = "0.1.0-dev"

// String is "<version> (commit <commit>)", the one line `--version` prints
// after the program name and the version the daemon reports to clients.
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
		if info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = strings.TrimPrefix(info.Main.Version, "v")
		}
	}
	if c == "" {
		c = vcsCommit(info)
	}
	return v, c
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
