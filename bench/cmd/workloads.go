package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// The workloads group: what agents actually run — pandas reading
// a CSV, a matplotlib figure, gathered binding calls, pure-Python compute —
// in fresh runs (both tiers, with and without CODERUN_PRELOAD) and in a
// session, side by side with two references measured in the same run: a
// `python -c` subprocess per program (what a naive host does) and a warm
// Jupyter kernel (warm state, no isolation). Every host runs the same
// interpreter (-workload-python, the project's .venv) and must return the
// same value; a host that does not fails the group.

// workload is one program of the group, written as the daemon runs it: a
// function body, where top-level await and return are allowed. The
// references run it wrapped in a function (referenceSource).
type workload struct {
	name     string // the rows' label
	program  string
	csv      bool   // in.csv (workloadCSV) is in the working directory
	png      bool   // the program displays one figure, which must come back as image/png
	want     string // the value every host returns, as compact JSON
	perRound int    // timed samples per round and host
	probe    bool   // the preload target's probes: fresh daemon runs only
	// jupyterTarget: the targets hold fresh runs of w to the warm
	// kernel (≤ 1.5×, with the preload) and to python -c (≥ 20× faster).
	jupyterTarget bool
}

// workloadCSV is W1's 1 MiB input: three numeric columns, whole lines; and
// how many rows it has.
func workloadCSV() (csv string, rows int) {
	var b strings.Builder
	b.WriteString("id,bucket,ratio\n")
	for b.Len() < 1<<20 {
		line := fmt.Sprintf("%d,%d,%.4f\n", rows, rows*7919%100003, float64(rows)/7)
		if b.Len()+len(line) > 1<<20 {
			break
		}
		b.WriteString(line)
		rows++
	}
	return b.String(), rows
}

// workloads are the probes of the preload target, then W1–W4.
func workloads(csvRows int) []workload {
	return []workload{
		{name: "return 1", program: "return 1", want: "1", perRound: 5, probe: true},
		{name: "import pandas as pd; return 1", program: "import pandas as pd\nreturn 1", want: "1", perRound: 1, probe: true},
		{name: "W1 pandas: read a 1 MiB CSV, describe()", csv: true, perRound: 1, jupyterTarget: true,
			program: "import pandas as pd\ndf = pd.read_csv(\"in.csv\")\nd = df.describe()\nreturn int(d.loc[\"count\"].sum())",
			want:    fmt.Sprint(3 * csvRows)},
		{name: "W2 matplotlib figure shown with display()", png: true, want: "1", perRound: 1, jupyterTarget: true,
			program: "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n" +
				"ax.plot(range(100), [i * i for i in range(100)])\nax.set_title(\"squares\")\n" +
				"display(fig)\nplt.close(fig)\nreturn 1"},
		{name: "W3 100 gathered binding calls + JSON transform", want: "[50,2450]", perRound: 3,
			program: "import asyncio, json\n" +
				"rows = await asyncio.gather(*(tools.echo({\"id\": i, \"name\": f\"item{i}\", \"score\": i / 2, \"tags\": [\"a\", \"b\"]}) for i in range(100)))\n" +
				"kept = sorted((r for r in rows if r[\"id\"] % 2 == 0), key=lambda r: -r[\"score\"])\n" +
				"back = json.loads(json.dumps(kept))\nreturn [len(back), sum(r[\"id\"] for r in back)]"},
		{name: "W4 pure Python: sum(i*i for i in range(10**6))", want: `"333332833333500000"`, perRound: 3,
			program: "return str(sum(i * i for i in range(10**6)))"},
	}
}

// outcome is what a host returned for one run: the value as compact JSON
// and the MIME types of each displayed object.
type outcome struct {
	value    string
	displays [][]string
}

// check fails unless o is what w must return.
func (w workload) check(o outcome) error {
	if o.value != w.want {
		return fmt.Errorf("%s returned %s, want %s", w.name, o.value, w.want)
	}
	if !w.png {
		return nil
	}
	for _, d := range o.displays {
		for _, mime := range d {
			if mime == "image/png" {
				return nil
			}
		}
	}
	return fmt.Errorf("%s displayed no image/png (displays: %v)", w.name, o.displays)
}

// compactJSON is raw in compact form ("" when it is not JSON), so values
// from different hosts compare as text.
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}

// host runs workloads one at a time.
type host interface {
	label() string
	// warm prepares a round of w's samples: a session or a kernel runs w
	// once, untimed, so each timed run finds the state it left.
	warm(w workload) error
	// once runs w and times it from the request to its whole answer.
	once(w workload) (outcome, time.Duration, error)
}

// workloadsRows is the group: hosts started, rounds of interleaved samples,
// then the rows. Without an interpreter that has pandas and matplotlib
// there are no rows; without ipykernel and jupyter_client there is no
// Jupyter reference (each said on stderr).
func workloadsRows(o options) ([]row, error) {
	py, why := workloadPython(o.workloadPython)
	if why != "" {
		fmt.Fprintln(os.Stderr, "bench: workloads: skipped:", why)
		return nil, nil
	}
	wo := o
	wo.python = py
	csv, csvRows := workloadCSV()
	ws := workloads(csvRows)
	hs, err := startWorkloadHosts(wo, csv)
	if err != nil {
		return nil, err
	}
	defer hs.stop()
	rounds := 5
	if o.quick {
		rounds = 1
	}
	m, err := measureWorkloads(hs.all(), ws, rounds, o.quick)
	if err != nil {
		return nil, err
	}
	rows := workloadTimeRows(hs, ws, m)
	more, err := hs.memoryRows()
	if err != nil {
		return nil, err
	}
	rows = append(rows, more...)
	return append(rows, preloadStartRows(wo, hs.tiers())...), nil
}

// workloadPython resolves the workloads' interpreter, or says why it cannot
// run them.
func workloadPython(name string) (string, string) {
	py, err := realPython(name)
	if err != nil {
		return "", fmt.Sprintf("no interpreter %s (make bench installs the project's .venv): %v", name, err)
	}
	if missing := lacks(py, "pandas", "matplotlib"); missing != "" {
		return "", fmt.Sprintf("%s lacks %s", py, missing)
	}
	return py, ""
}

// lacks says which of modules python cannot find, or why it cannot tell
// ("" when it has them all). It looks them up without importing them:
// milliseconds, where importing pandas takes seconds.
func lacks(python string, modules ...string) string {
	src := "import importlib.util, sys\nprint(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
	out, err := exec.Command(python, append([]string{"-c", src}, modules...)...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return err.Error()
	}
	if err != nil {
		return lastLine(out)
	}
	return strings.TrimSpace(string(out))
}

// lastLine is the last non-empty line of out (a traceback's message).
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// measured holds, per host and workload, the samples of each round.
type measured map[host]map[string][]samples

// measureWorkloads runs rounds of samples: in each, every workload on every
// host, hosts in an order rotated from round to round, so that a machine
// whose load moves weighs on all of them alike. Probes run on fresh daemon
// hosts only; in quick mode each cell gets one sample.
func measureWorkloads(hosts []host, ws []workload, rounds int, quick bool) (measured, error) {
	m := measured{}
	for _, h := range hosts {
		m[h] = map[string][]samples{}
	}
	for r := range rounds {
		for _, w := range ws {
			for i := range hosts {
				h := hosts[(i+r)%len(hosts)]
				if _, fresh := h.(*freshHost); w.probe && !fresh {
					continue
				}
				s, err := sampleRound(h, w, quick)
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", w.name, h.label(), err)
				}
				m[h][w.name] = append(m[h][w.name], s)
			}
		}
	}
	return m, nil
}

// sampleRound is one round of w on h: warmed, then timed and checked.
func sampleRound(h host, w workload, quick bool) (samples, error) {
	if err := h.warm(w); err != nil {
		return nil, err
	}
	n := w.perRound
	if quick {
		n = 1
	}
	s := make(samples, 0, n)
	for range n {
		got, took, err := h.once(w)
		if err != nil {
			return nil, err
		}
		if err := w.check(got); err != nil {
			return nil, err
		}
		s = append(s, took)
	}
	return s, nil
}

// cell summarises the rounds of one host and workload: the p50 of every
// sample, and the lowest and highest of the rounds' own p50s (the spread).
type cell struct {
	p50, low, high time.Duration
	n              int
}

func summarise(rounds []samples) cell {
	var all, mids samples
	for _, s := range rounds {
		all = append(all, s...)
		mids = append(mids, s.pct(50))
	}
	if len(all) == 0 {
		return cell{}
	}
	sort.Slice(mids, func(i, j int) bool { return mids[i] < mids[j] })
	return cell{p50: all.pct(50), low: mids[0], high: mids[len(mids)-1], n: len(all)}
}

// spreadNote says how many samples and how far the rounds' p50s moved.
func (c cell) spreadNote() string {
	return fmt.Sprintf("%d samples; rounds' p50 %.1f–%.1f ms", c.n, ms(c.low), ms(c.high))
}
