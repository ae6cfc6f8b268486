package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// preloadModules is the preload the workload targets are stated for.
const preloadModules = "numpy,pandas,matplotlib.pyplot"

// heavyPython is the interpreter with numpy, pandas and matplotlib the
// preload group runs (BENCH_HEAVY_PYTHON, else the project's .venv), or ""
// when it has not them.
func heavyPython() string {
	py := cmp.Or(os.Getenv("BENCH_HEAVY_PYTHON"), ".venv/bin/python")
	if abs, err := filepath.Abs(py); err == nil {
		py = abs
	}
	if exec.Command(py, "-c", "import numpy, pandas, matplotlib").Run() != nil {
		return ""
	}
	return py
}

// Programs of the preload group: the bare run, the import the preload
// saves, and a plot (matplotlib's font cache, docs/containment.md §4.4).
const (
	importPandas = "import pandas as pd\nreturn 1"
	plotRun      = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()\nreturn 1"
	// privateKb is the run's own private memory (kB): what its pages cost
	// beside the ones it shares with the fork server.
	privateKb = "f = open('/proc/self/smaps_rollup').read()\n" +
		"return sum(int(l.split()[1]) for l in f.splitlines() if l.startswith(('Private_Clean', 'Private_Dirty')))"
)

// preloadRows measures, in each tier, a daemon with CODERUN_PRELOAD=
// preloadModules and one without, on the heavy interpreter: fresh paced
// runs of return 1, of import pandas and of a plot (target: import pandas
// ≤ 1.5 × return 1 with the preload), the daemon's tree's memory (PSS), a
// return 1's private memory, and the time from the daemon's start to its
// first result.
func preloadRows(o options) ([]row, error) {
	py := heavyPython()
	if py == "" {
		fmt.Fprintln(os.Stderr, "bench: preload: no interpreter with numpy, pandas and matplotlib (BENCH_HEAVY_PYTHON, .venv): no rows")
		return nil, nil
	}
	tiers, preloads := []string{"process", "sandbox"}, []string{preloadModules, ""}
	if o.quick { // make test-bench: the harness, not the figures (each import without the preload takes seconds)
		tiers, preloads = tiers[:1], preloads[:1]
	}
	var rows []row
	for _, tier := range tiers {
		for _, preload := range preloads {
			r, err := preloadTierRows(o, py, tier, preload)
			if err != nil {
				return nil, fmt.Errorf("tier %s, preload %q: %w", tier, preload, err)
			}
			rows = append(rows, r...)
		}
	}
	return rows, nil
}

func preloadTierRows(o options, py, tier, preload string) ([]row, error) {
	label := "tier " + tier + ", preload " + preload
	if preload == "" {
		label = "tier " + tier + ", no preload"
	}
	t0 := time.Now()
	d, err := startDaemon(o, "CODERUN_PYTHON_BIN="+py, "CODERUN_ISOLATION="+tier, "CODERUN_PRELOAD="+preload)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	if _, err := d.run("return 1", nil); err != nil {
		return nil, err
	}
	first := time.Since(t0)
	if preload != "" {
		waitPreloaded(d)
	}
	n, heavy := 30, 30
	if preload == "" {
		heavy = 5 // each pays every import
	}
	if o.quick {
		n, heavy = 2, 1
	}
	var bare, pandas, plot samples
	for i := range max(n, heavy) {
		if i < n {
			s, err := pacedRun(d, "return 1", nil)
			if err != nil {
				return nil, err
			}
			bare = append(bare, s)
		}
		if i < heavy {
			for _, p := range []struct {
				program string
				into    *samples
			}{{importPandas, &pandas}, {plotRun, &plot}} {
				s, err := pacedRun(d, p.program, nil)
				if err != nil {
					return nil, err
				}
				*p.into = append(*p.into, s)
			}
		}
	}
	private, err := d.run(privateKb, nil)
	if err != nil {
		return nil, err
	}
	var privKb float64
	_ = json.Unmarshal(private.Value, &privKb)
	time.Sleep(refillPause)
	p50 := func(s samples) float64 { return ms(s.pct(50)) }
	return []row{
		newRow("fresh return 1, "+label+", p50", "ms", 0, p50(bare), "paced"),
		newRow("fresh import pandas, "+label+", p50", "ms", p50(bare), p50(pandas), "ratio: / return 1 (target ≤ 1.5 with the preload)"),
		newRow("fresh plot (plt.plot, show), "+label+", p50", "ms", p50(bare), p50(plot), "ratio: / return 1"),
		newRow("daemon's process tree PSS at rest, "+label, "MB", 0, treePssKb(d.cmd.Process.Pid)/1024, "daemon, fork server, warm children"),
		newRow("return 1's private memory, "+label, "MB", 0, privKb/1024, "Private_Clean + Private_Dirty"),
		newRow("daemon start to its first result, "+label, "ms", 0, ms(first), "return 1"),
	}, nil
}

// waitPreloaded waits (60 s at most: a daemon without the preload never
// has it) until a fresh run finds pandas imported.
func waitPreloaded(d *daemon) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(refillPause) {
		if r, err := d.run("import sys\nreturn 'pandas' in sys.modules", nil); err == nil && string(r.Value) == "true" {
			return
		}
	}
	fmt.Fprintln(os.Stderr, "bench: preload: the daemon never served a preloaded run")
}

// treePssKb sums the proportional set size of pid and its descendants.
func treePssKb(pid int) float64 {
	total := 0.0
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "Pss:"); ok {
				v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
				total += v
			}
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid)) // any thread may have forked
	for _, t := range tasks {
		kids, _ := os.ReadFile(t)
		for _, k := range strings.Fields(string(kids)) {
			if c, err := strconv.Atoi(k); err == nil {
				total += treePssKb(c)
			}
		}
	}
	return total
}
