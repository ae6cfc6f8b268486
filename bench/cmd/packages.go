package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/wheeltest"
)

// The packages group (docs/packages.md): what a cached set adds to a fresh
// run, and a first installation against uv run by hand, both from a
// find-links directory of small pure-Python wheels the group writes.

// benchSets is how many distinct sets the first-install rows install.
const benchSets = 9

// packageRows measures, in tier process: paced return 1 runs with and
// without a cached package set, interleaved (target: the set adds ≤ 1 ms),
// and first installations (stats.installMs) against `uv pip install` of the
// same set by hand with a cold cache (target: ≤ 1.5×).
func packageRows(o options) ([]row, error) {
	uv, err := wheeltest.LocateUV()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-packages-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	links := filepath.Join(dir, "links")
	n := benchSets
	if o.quick {
		n = 1
	}
	if err := writeBenchWheels(links, n+1); err != nil {
		return nil, err
	}
	d, err := startDaemon(o, "CODERUN_PACKAGES=*", "CODERUN_PACKAGE_INDEX=none", "CODERUN_PACKAGE_FIND_LINKS="+links,
		"CODERUN_PACKAGE_CACHE_DIR="+filepath.Join(dir, "cache"), "CODERUN_UV_BIN="+uv)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	rows, err := cacheHitRows(o, d)
	if err != nil {
		return nil, err
	}
	more, err := firstInstallRows(o, d, uv, links, dir, n)
	return append(rows, more...), err
}

// writeBenchWheels writes sets 0…n-1: set i is bench<i>-a, which needs
// bench<i>-b and bench<i>-c, each with a module of a few lines.
func writeBenchWheels(links string, n int) error {
	if err := os.MkdirAll(links, 0o755); err != nil {
		return err
	}
	for i := range n {
		prefix := "bench" + strconv.Itoa(i)
		for _, part := range []string{"a", "b", "c"} {
			w := wheeltest.Wheel{Name: prefix + "-" + part, Version: "1.0",
				Files: map[string]string{prefix + "_" + part + "/__init__.py": "def f(x):\n    return x + 1\n\nNAME = '" + part + "'\n"}}
			if part == "a" {
				w.Requires = []string{prefix + "-b", prefix + "-c"}
			}
			if _, err := wheeltest.WriteWheel(links, w); err != nil {
				return err
			}
		}
	}
	return nil
}

// cacheHitRows alternates paced runs without packages and with set 0 (cached
// after the first), and reports both p50s and their difference.
func cacheHitRows(o options, d *daemon) ([]row, error) {
	with := map[string]any{"packages": []string{"bench0-a"}}
	if _, err := d.run("import bench0_a", with); err != nil { // installs it
		return nil, err
	}
	runs := 40
	if o.quick {
		runs = 3
	}
	var plain, hit samples
	for range runs {
		p, err := pacedRun(d, "return 1", nil)
		if err != nil {
			return nil, err
		}
		h, err := pacedRun(d, "return 1", with)
		if err != nil {
			return nil, err
		}
		plain, hit = append(plain, p), append(hit, h)
	}
	note := "interleaved with the run without packages; target: +≤ 1 ms"
	return []row{
		newRow("return 1, warm, paced, packages cached, p50", "ms", ms(plain.pct(50)), ms(hit.pct(50)), note),
		newRow("packages cached: added to a fresh run, p50", "ms", 0, ms(hit.pct(50))-ms(plain.pct(50)), "target ≤ 1"),
	}, nil
}

// firstInstallRows installs sets 1…n through the daemon (their installMs)
// and each by hand into a directory of its own with a cold uv cache, plain
// and with --compile-bytecode (the daemon compiles bytecode too: a set is
// read-only, so an import could not cache what it compiles). The three
// take turns at going first (the first installation of a set is the
// slower, whichever it is); the notes give each column's range.
func firstInstallRows(o options, d *daemon, uv, links, dir string, n int) ([]row, error) {
	var daemonTook, byHand, byHandBytecode samples
	for i := 1; i <= n; i++ {
		name, at := "bench"+strconv.Itoa(i)+"-a", filepath.Join(dir, strconv.Itoa(i))
		installs := []func() error{
			func() error { took, err := installMsOf(d, name); daemonTook = append(daemonTook, took); return err },
			func() error {
				took, err := installByHand(o, uv, links, at+"-hand", name)
				byHand = append(byHand, took)
				return err
			},
			func() error {
				took, err := installByHand(o, uv, links, at+"-hand-bc", name, "--compile-bytecode")
				byHandBytecode = append(byHandBytecode, took)
				return err
			},
		}
		for k := range installs {
			if err := installs[(i+k)%len(installs)](); err != nil {
				return nil, err
			}
		}
	}
	took := spreadOf("daemon", daemonTook)
	note := "a set of 3 wheels; by hand: uv pip install --target with a cold cache; " + spreadOf("by hand", byHand) + "; " + took + "; target ≤ 1.5×"
	return []row{
		newRow("packages: first install (stats.installMs), p50", "ms", ms(byHand.pct(50)), ms(daemonTook.pct(50)), note),
		newRow("packages: first install against by hand --compile-bytecode, p50", "ms", ms(byHandBytecode.pct(50)), ms(daemonTook.pct(50)),
			spreadOf("by hand", byHandBytecode)+"; "+took),
	}, nil
}

// spreadOf names a column's samples: how many, the lowest and the highest.
func spreadOf(column string, s samples) string {
	return fmt.Sprintf("%s: %d sets, %.0f–%.0f ms", column, len(s), ms(s.pct(0)), ms(s.pct(100)))
}

// installByHand times `uv pip install --target dir name` (and extra) with a
// cold cache of its own.
func installByHand(o options, uv, links, dir, name string, extra ...string) (time.Duration, error) {
	args := append([]string{"pip", "install", "--quiet", "--no-index", "--find-links", links, "--python", o.python,
		"--cache-dir", dir + "-cache", "--target", dir, name}, extra...)
	start := time.Now()
	if out, err := exec.Command(uv, args...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("uv pip install by hand: %v: %s", err, out)
	}
	return time.Since(start), nil
}

// installMsOf runs an import of name's set and returns its stats.installMs.
func installMsOf(d *daemon, name string) (time.Duration, error) {
	raw, err := d.runRaw("return 1", map[string]any{"packages": []string{name}})
	if _, err := decodeRun(raw, err); err != nil {
		return 0, err
	}
	var r struct {
		Stats struct {
			InstallMs *int64 `json:"installMs"`
		} `json:"stats"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Stats.InstallMs == nil {
		return 0, fmt.Errorf("no stats.installMs in %s", raw)
	}
	return time.Duration(*r.Stats.InstallMs) * time.Millisecond, nil
}
