package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	withVersion := func(info *debug.BuildInfo, v string) *debug.BuildInfo {
		info.Main.Version = v
		return info
	}
	tagged := withVersion(vcs("vcs.revision", "abc123"), "v1.2.3")
	cases := []struct {
		name, version, commit string
		info                  *debug.BuildInfo
		wantV, wantC          string
	}{
		{"stamped wins", "0.2.0", "feed", tagged, "0.2.0", "feed"},
		{"plain build with vcs", "", "", vcs("vcs.revision", "abc123", "vcs.modified", "false"), devVersion, "abc123"},
		{"dirty tree", "", "", vcs("vcs.revision", "abc123", "vcs.modified", "true"), devVersion, "abc123-dirty"},
		{"module version from a tag", "", "", tagged, "1.2.3", "abc123"},
		{"no vcs recorded", "", "", vcs(), devVersion, "unknown"},
		{"untagged commit: pseudo-version", "", "", withVersion(vcs("vcs.revision", "ffb3b494c24efc3f"),
			"v0.0.0-20261203100015-ffb3b494c24e"), devVersion, "ffb3b494c24efc3f"},
		{"untagged dirty tree", "", "", withVersion(vcs("vcs.revision", "ffb3", "vcs.modified", "true"),
			"v0.1.1-0.20261203100015-ffb3b494c24e+dirty"), devVersion, "ffb3-dirty"},
		{"no build info", "", "", nil, devVersion, "unknown"},
	}
	for _, tc := range cases {
		v, c := resolve(tc.version, tc.commit, tc.info)
		if v != tc.wantV || c != tc.wantC {
			t.Errorf("%s: got %q %q, want %q %q", tc.name, v, c, tc.wantV, tc.wantC)
		}
	}
}

// A binary stamped the way `make dist` stamps it prints both values.
func TestStampedBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "coderun-rpc")
	const pkg = "github.com/coderun-rpc/coderun-rpc/internal/buildinfo"
	build := exec.Command("go", "build", "-trimpath", "-ldflags",
		"-s -w -X "+pkg+".version=9.8.7 -X "+pkg+".commit=0123abcd", "-o", bin, "../../cmd/coderun-rpc")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "coderun-rpc 9.8.7 (commit 0123abcd)" {
		t.Errorf("--version printed %q", got)
	}
}
