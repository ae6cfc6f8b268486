package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The daemon side of the workloads group: a daemon per tier and preload,
// each measured in fresh runs; a session on each tier's daemon without the
// preload; their memory; and their start with and without the preload.

// daemonConfig is one daemon of the group.
type daemonConfig struct {
	tier    string
	preload bool
}

func (c daemonConfig) label() string {
	if c.preload {
		return "tier " + c.tier + ", preload"
	}
	return "tier " + c.tier
}

func (c daemonConfig) env() []string {
	env := []string{"CODERUN_ISOLATION=" + c.tier}
	if c.preload {
		env = append(env, "CODERUN_PRELOAD="+preloadModules)
	}
	return env
}

// workloadConfigs are the group's daemons: both tiers with and without the
// preload; in quick mode tier process without it (the smoke of make test).
func workloadConfigs(quick bool) []daemonConfig {
	if quick {
		return []daemonConfig{{tier: "process"}}
	}
	return []daemonConfig{{"process", false}, {"process", true}, {"sandbox", false}, {"sandbox", true}}
}

// freshHost runs each program as a fresh run of its daemon, after a pause
// that lets the warm pool have a child ready (an agent thinks between runs).
type freshHost struct {
	d   *daemon
	cfg daemonConfig
	csv []map[string]string
}

func (h *freshHost) label() string       { return "fresh, " + h.cfg.label() }
func (h *freshHost) warm(workload) error { return nil }

func (h *freshHost) once(w workload) (outcome, time.Duration, error) {
	time.Sleep(refillPause)
	return daemonRun(h.d, w, h.csv, "")
}

// sessionHost runs each program in one open session, after the same
// program ran there untimed (the round's warm): a session's state is warm.
type sessionHost struct {
	d   *daemon
	cfg daemonConfig
	id  string
	csv []map[string]string
}

func (h *sessionHost) label() string { return "in a session, " + h.cfg.label() }

func (h *sessionHost) warm(w workload) error {
	_, _, err := daemonRun(h.d, w, h.csv, h.id)
	return err
}

func (h *sessionHost) once(w workload) (outcome, time.Duration, error) {
	return daemonRun(h.d, w, h.csv, h.id)
}

// daemonRun runs w on d (in session id unless ""), with in.csv among the
// run's files when w reads it, timed to the response's last byte.
func daemonRun(d *daemon, w workload, csv []map[string]string, id string) (outcome, time.Duration, error) {
	extra := map[string]any{}
	if w.csv {
		extra["files"] = csv
	}
	if id != "" {
		extra["sessionId"] = id
	}
	params, err := runParams(w.program, extra)
	if err != nil {
		return outcome{}, 0, err
	}
	start := time.Now()
	m, err := call(d.conn, "run", params)
	if err != nil {
		return outcome{}, 0, err
	}
	var r struct {
		Value   json.RawMessage `json:"value"`
		Outputs []struct {
			Data map[string]json.RawMessage `json:"data"`
		} `json:"outputs"`
		Error *struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		return outcome{}, 0, err
	}
	if r.Error != nil {
		return outcome{}, 0, fmt.Errorf("run failed: %s: %s", r.Error.Kind, r.Error.Message)
	}
	o := outcome{value: compactJSON(r.Value)}
	for _, out := range r.Outputs {
		o.displays = append(o.displays, mimeTypes(out.Data))
	}
	return o, m.At.Sub(start), nil
}

// workloadHosts are the group's hosts and what they share.
type workloadHosts struct {
	fresh    []*freshHost
	sessions []*sessionHost
	pythonC  *pythonCHost
	jupyter  *jupyterHost // nil when the interpreter has no ipykernel
	echo     *echoSocket
	dir      string // the references' working directory, the echo socket's
}

// startWorkloadHosts starts every daemon of workloadConfigs (a tier that
// cannot start is left out, said on stderr), a session on each tier's
// daemon without the preload, and the references; in quick mode neither a
// session nor the Jupyter reference.
func startWorkloadHosts(o options, csv string) (hs *workloadHosts, err error) {
	dir, err := os.MkdirTemp("", "bench-workloads-")
	if err != nil {
		return nil, err
	}
	hs = &workloadHosts{dir: dir}
	defer func() {
		if err != nil {
			hs.stop()
		}
	}()
	files := []map[string]string{{"path": "in.csv", "base64": base64.StdEncoding.EncodeToString([]byte(csv))}}
	for _, cfg := range workloadConfigs(o.quick) {
		d, err := startDaemon(o, cfg.env()...)
		if err != nil && (cfg.tier == "sandbox" || cfg.preload) {
			// The kernel may lack a sandbox feature; a daemon may refuse the
			// preload (one that does not fit the address-space budget).
			fmt.Fprintf(os.Stderr, "bench: workloads: %s did not start, no rows: %v\n", cfg.label(), err)
			continue
		}
		if err != nil {
			return nil, err
		}
		hs.fresh = append(hs.fresh, &freshHost{d: d, cfg: cfg, csv: files})
		if cfg.preload {
			if err := awaitPreload(d); err != nil {
				return nil, err
			}
			continue
		}
		if o.quick { // the session groups' own smoke covers a session's runs
			continue
		}
		id, err := d.openSession()
		if err != nil {
			return nil, err
		}
		hs.sessions = append(hs.sessions, &sessionHost{d: d, cfg: cfg, id: id, csv: files})
	}
	socket := filepath.Join(dir, "tools.sock")
	if hs.echo, err = startEchoSocket(socket); err != nil {
		return nil, err
	}
	hs.pythonC = &pythonCHost{python: o.python, dir: dir, socket: socket, csv: csv}
	if o.quick { // a kernel's start and imports would double the smoke's time
		fmt.Fprintln(os.Stderr, "bench: workloads: no Jupyter reference in -quick (make bench runs it)")
		return hs, nil
	}
	if hs.jupyter, err = startJupyter(o.python, dir, socket, csv); err != nil {
		fmt.Fprintln(os.Stderr, "bench: workloads: no Jupyter reference:", err)
		hs.jupyter, err = nil, nil
	}
	return hs, nil
}

// all lists the hosts in a fixed order: the references, then the daemons.
func (hs *workloadHosts) all() []host {
	out := []host{hs.pythonC}
	if hs.jupyter != nil {
		out = append(out, hs.jupyter)
	}
	return append(out, hs.daemons()...)
}

// daemons lists the fresh hosts, then the sessions.
func (hs *workloadHosts) daemons() []host {
	var out []host
	for _, h := range hs.fresh {
		out = append(out, h)
	}
	for _, h := range hs.sessions {
		out = append(out, h)
	}
	return out
}

// tiers are the tiers whose daemons started.
func (hs *workloadHosts) tiers() []string {
	var out []string
	for _, h := range hs.fresh {
		if !h.cfg.preload {
			out = append(out, h.cfg.tier)
		}
	}
	return out
}

func (hs *workloadHosts) stop() {
	for _, h := range hs.fresh {
		h.d.stop()
	}
	if hs.jupyter != nil {
		hs.jupyter.stop()
	}
	if hs.echo != nil {
		hs.echo.stop()
	}
	os.RemoveAll(hs.dir)
}

// workloadTimeRows: for each of W1–W4, the references' p50s, then each
// daemon host's with the warm kernel as its floor (ratio daemon / kernel)
// and the python -c subprocess's speed-up in its note; then the probes:
// each fresh host's import pandas against its own return 1.
func workloadTimeRows(hs *workloadHosts, ws []workload, m measured) []row {
	var rows []row
	for _, w := range ws {
		if w.probe {
			continue
		}
		naive := summarise(m[hs.pythonC][w.name])
		rows = append(rows, newRow(w.name+", "+hs.pythonC.label()+", p50", "ms", 0, ms(naive.p50), naive.spreadNote()))
		var kernel cell
		if hs.jupyter != nil {
			kernel = summarise(m[hs.jupyter][w.name])
			rows = append(rows, newRow(w.name+", "+hs.jupyter.label()+", p50", "ms", 0, ms(kernel.p50), kernel.spreadNote()))
		}
		for _, h := range hs.daemons() {
			c := summarise(m[h][w.name])
			note := fmt.Sprintf("%s; python -c ÷ this %.1f×", c.spreadNote(), float64(naive.p50)/float64(c.p50))
			if _, fresh := h.(*freshHost); fresh && w.jupyterTarget {
				note += " (targets: ratio ≤ 1.5 with the preload, python -c ÷ this ≥ 20)"
			}
			rows = append(rows, newRow(w.name+", "+h.label()+", p50", "ms", ms(kernel.p50), ms(c.p50), note))
		}
	}
	for _, h := range hs.fresh {
		base := summarise(m[h]["return 1"])
		rows = append(rows, newRow("return 1, "+h.label()+", p50", "ms", 0, ms(base.p50), base.spreadNote()))
		c := summarise(m[h]["import pandas as pd; return 1"])
		note := c.spreadNote() + "; ratio: ÷ this daemon's fresh return 1"
		if h.cfg.preload {
			note += " (target ≤ 1.5)"
		}
		rows = append(rows, newRow("import pandas as pd; return 1, "+h.label()+", p50", "ms", ms(base.p50), ms(c.p50), note))
	}
	return rows
}

// preloadedProgram returns which of preloadModules a fresh child finds
// already imported: what the preload does in this build (a daemon that
// ignores CODERUN_PRELOAD gives none).
const preloadedProgram = "import sys\nreturn [m for m in " + `"` + preloadModules + `"` + ".split(',') if m in sys.modules]"

// privateProgram returns the child's own private memory in kB (its
// smaps_rollup), or null where /proc does not show it.
const privateProgram = `try:
    lines = open("/proc/self/smaps_rollup").read().splitlines()
except OSError:
    return None
return sum(int(l.split()[1]) for l in lines if l.startswith(("Private_Clean:", "Private_Dirty:")))`

// awaitPreload waits, at most a minute, until a fresh run of d finds the
// whole preload imported: runs that come before the preloaded fork server
// is ready are served without it, and the rounds measure that server. A
// daemon whose initialize lists no preload (a build without it) is not
// waited for.
func awaitPreload(d *daemon) error {
	if len(d.preload) == 0 {
		return nil
	}
	want := strings.Count(preloadModules, ",") + 1
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(refillPause) {
		r, err := d.run(preloadedProgram, nil)
		if err != nil {
			return err
		}
		var mods []string
		_ = json.Unmarshal(r.Value, &mods)
		if len(mods) == want {
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "bench: workloads: after a minute a fresh run finds only %v of %s imported\n", mods, preloadModules)
			return nil
		}
	}
}

// memoryRows, per fresh host: which preloaded modules a fresh child has,
// the daemon's and its fork server's RSS after the rounds, and a child's
// own private memory, read by a fresh run itself.
func (hs *workloadHosts) memoryRows() ([]row, error) {
	var rows []row
	for _, h := range hs.fresh {
		r, err := h.d.run(preloadedProgram, nil)
		if err != nil {
			return nil, err
		}
		var mods []string
		_ = json.Unmarshal(r.Value, &mods)
		rows = append(rows, newRow("modules preloaded in a fresh child, "+h.cfg.label(), "of 3", 0, float64(len(mods)),
			"imported before the program: ["+strings.Join(mods, ", ")+"]"))
		pid := h.d.cmd.Process.Pid
		daemonKb, serverKb := procStatusKb(pid, "VmRSS"), 0.0
		servers := forkServerPids(pid)
		for _, server := range servers {
			serverKb += procStatusKb(server, "VmRSS")
		}
		note := fmt.Sprintf("%d fork server process(es)", len(servers))
		time.Sleep(refillPause)
		if r, err = h.d.run(privateProgram, nil); err != nil {
			return nil, err
		}
		private, _ := strconv.ParseFloat(string(r.Value), 64)
		rows = append(rows,
			newRow("daemon RSS after the rounds, "+h.cfg.label(), "MB", 0, daemonKb/1024, ""),
			newRow("fork server RSS after the rounds, "+h.cfg.label(), "MB", 0, serverKb/1024, note),
			newRow("daemon + fork server RSS, "+h.cfg.label(), "MB", 0, (daemonKb+serverKb)/1024, ""),
			newRow("a fresh child's private memory (Private_Clean + Private_Dirty), "+h.cfg.label(), "MB", 0, private/1024,
				"read by the run itself from /proc/self/smaps_rollup; 0 where it cannot"))
	}
	return rows, nil
}

// forkServerPids are the daemon's fork servers: its children whose command
// line runs forkserver.py.
func forkServerPids(daemon int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || parentPid(pid) != daemon {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmdline), "forkserver.py") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parentPid reads pid's parent from /proc/<pid>/stat (0 when unreadable):
// the field after the command, which may itself hold spaces and parentheses.
func parentPid(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// preloadStartRows: in each tier, a daemon's start to its first return 1's
// result with and without the preload, p50 of starts alternating between
// the two (target: unchanged within noise). A tier where a daemon does not
// start has no rows, said on stderr.
func preloadStartRows(o options, tiers []string) []row {
	n := 6
	if o.quick {
		n = 1
	}
	var rows []row
	for _, tier := range tiers {
		plain, preload := daemonConfig{tier: tier}, daemonConfig{tier: tier, preload: true}
		_, first, err := startTimes(o, n, plain.env(), preload.env())
		if err != nil { // a daemon may refuse the preload: the other rows stand
			fmt.Fprintf(os.Stderr, "bench: workloads: no start rows in tier %s: %v\n", tier, err)
			continue
		}
		rows = append(rows,
			newRow("daemon start to its first run's result, "+plain.label()+", p50", "ms", 0, ms(first[0].pct(50)), "return 1"),
			newRow("daemon start to its first run's result, "+preload.label()+", p50", "ms", ms(first[0].pct(50)), ms(first[1].pct(50)),
				"return 1; ratio: ÷ without the preload (target: unchanged within noise)"))
	}
	return rows
}
