package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// CODERUN_PRELOAD (docs/containment.md §4.4): the fork server imports the
// modules before it serves, so a fresh run finds them in sys.modules; every
// run still starts from the server's untouched state.

// preloadReady waits for the daemon's log line saying the preloaded fork
// server serves (the warm pool then holds forks of it).
func preloadReady(t *testing.T, d *daemon) {
	t.Helper()
	waitFor(t, func() bool { return d.stderr.logged("preload: the fork server is ready") },
		"the preloaded fork server; stderr:\n"+d.stderr.String())
}

// C860–C865, C873: a daemon preloading numpy, pandas and matplotlib.pyplot
// (one optional module not installed) reports them in initialize, and its
// runs and sessions start with them imported, from the same state each time,
// with seeds of their own; a plotting run's logs are clean.
func TestPreload(t *testing.T) {
	t.Parallel()
	py := venvPython(t, "numpy", "pandas", "matplotlib")
	d := start(t, map[string]string{"CODERUN_PYTHON_BIN": py,
		"CODERUN_PRELOAD": "numpy,?coderun_no_such_module,pandas,matplotlib.pyplot"})
	m := d.call("initialize", `{}`)
	var init struct {
		Capabilities struct {
			Python struct{ Preload []string }
		}
	}
	if m.Error != nil || json.Unmarshal(m.Result, &init) != nil {
		t.Fatalf("initialize: %+v %s", m.Error, m.Result)
	}
	t.Run("C860/initialize", func(t *testing.T) {
		if got := strings.Join(init.Capabilities.Python.Preload, ","); got != "numpy,pandas,matplotlib.pyplot" {
			t.Errorf("initialize reports preload %q, want numpy,pandas,matplotlib.pyplot", got)
		}
		if !d.stderr.logged(`msg="preload: optional module not installed; not preloaded" module=coderun_no_such_module`) {
			t.Errorf("no warning for the optional module; stderr:\n%s", d.stderr)
		}
		// The model reads the same in the stubs' header.
		if m := d.call("bindings/describe", `{}`); m.Error != nil ||
			!strings.Contains(string(m.Result), "Preloaded, so importing them costs nothing: numpy, pandas, matplotlib.pyplot.") {
			t.Errorf("bindings/describe: %+v %s", m.Error, m.Result)
		}
	})
	preloadReady(t, d)
	t.Run("C861/imported", func(t *testing.T) {
		expectOK(t, d.run(prog("import sys\nreturn ['pandas' in sys.modules, 'numpy' in sys.modules]")), "[true,true]")
	})
	t.Run("C862/untouched", func(t *testing.T) {
		// A run changes a preloaded module's state and poisons sys.modules; the next sees neither.
		poison := "import sys, json, pandas as pd\npd.set_option('display.max_rows', 7)\npd.DataFrame = None\n" +
			"sys.modules['json'] = 'poisoned'\nreturn pd.get_option('display.max_rows')"
		expectOK(t, d.run(prog(poison)), "7")
		check := "import sys, pandas as pd\nreturn [pd.get_option('display.max_rows'), pd.DataFrame is not None, " +
			"type(sys.modules['json']).__name__]"
		expectOK(t, d.run(prog(check)), `[60,true,"module"]`)
	})
	t.Run("C863/seeds", func(t *testing.T) {
		draw := prog("import random, numpy\nreturn [random.getrandbits(52), int(numpy.random.randint(0, 2**52))]")
		a, b := d.run(draw), d.run(draw)
		if a.Error != nil || b.Error != nil {
			t.Fatalf("draws: %+v %+v", a.Error, b.Error)
		}
		var x, y [2]int64
		_ = json.Unmarshal(a.Value, &x)
		_ = json.Unmarshal(b.Value, &y)
		if x[0] == y[0] || x[1] == y[1] {
			t.Errorf("two runs drew %v and %v: random or numpy.random not reseeded per run", x, y)
		}
	})
	t.Run("C864/session", func(t *testing.T) {
		sid := d.open("{}")
		if r := d.srun(sid, "import sys\nreturn 'pandas' in sys.modules"); string(r.Value) != "true" {
			t.Errorf("a session starts without the preload: %s", r.Value)
		}
	})
	t.Run("C873/plot", func(t *testing.T) {
		waitFor(t, func() bool { return d.stderr.logged("matplotlib: font cache built; runs use it") }, "the font cache")
		expectCleanPlot(t, d)
	})
	t.Run("C874/small-budget", func(t *testing.T) {
		// A budget the preloaded server (~190 MiB) would not leave room in: served cold.
		small := `"limits":{"addressSpaceMb":200,"maxOutputBytes":65536}`
		expectOK(t, d.run(prog("x = bytearray(10 * 2**20)\nreturn len(x)", small)), "10485760")
		sid := d.open(`{"limits":{"addressSpaceMb":200,"maxOutputBytes":65536}}`)
		if r := d.srun(sid, "x = bytearray(10 * 2**20)\nreturn len(x)"); r.Error != nil || string(r.Value) != "10485760" {
			t.Errorf("a session with a small budget: %s %+v", r.Value, r.Error)
		}
	})
	t.Run("C865/budget", func(t *testing.T) {
		// The preloaded pages count against the run's address space as its own do.
		r := d.run(prog("x = bytearray(500 * 2**20)\nreturn len(x)"))
		if r.Error == nil || r.Error.ExceptionType == nil || *r.Error.ExceptionType != "MemoryError" {
			t.Errorf("500 MiB in a 512 MiB address space beside the preload: %s %+v", r.Value, r.Error)
		}
	})
}

// preloadVenv is a virtual environment of realPython whose site-packages
// holds modules (name → source), for a preload that fails in a given way.
func preloadVenv(t *testing.T, modules map[string]string) string {
	t.Helper()
	venv := t.TempDir()
	if out, err := exec.Command(realPython, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("python -m venv: %v\n%s", err, out)
	}
	site, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	if len(site) != 1 {
		t.Fatalf("no site-packages in %s", venv)
	}
	for name, src := range modules {
		if err := os.WriteFile(filepath.Join(site[0], name+".py"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(venv, "bin", "python")
}

// C866–C870, C875: a preload that fails stops the daemon with one line naming the
// module and why (exit 2), after initialize was answered as without one; an
// optional module that fails is a warning; runs that arrive while the
// server preloads are served at once.
func TestPreloadFailures(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "go")
	py := preloadVenv(t, map[string]string{
		"coderun_boom":    "raise RuntimeError('boom at import')\n",
		"coderun_threads": "import threading, time\nthreading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n",
		"coderun_huge":    "import mmap\nm = mmap.mmap(-1, 300 << 20)\n",
		"coderun_gated":   "import os, time\nwhile not os.path.exists(" + jsonQuote(gate) + "):\n    time.sleep(0.01)\n",
	})
	fails := func(t *testing.T, env map[string]string, line string) {
		t.Helper()
		env["CODERUN_PYTHON_BIN"] = py
		d := start(t, env)
		if m := d.call("initialize", `{}`); m.Error != nil {
			t.Fatalf("initialize: %+v", m.Error)
		}
		if code := d.waitExit(60 * time.Second); code != 2 {
			t.Errorf("exit %d, want 2; stderr:\n%s", code, d.stderr)
		}
		if !strings.Contains(d.stderr.String(), "\n"+line) {
			t.Errorf("stderr lacks the line %q:\n%s", line, d.stderr)
		}
	}
	t.Run("C866/raises", func(t *testing.T) {
		fails(t, map[string]string{"CODERUN_PRELOAD": "json,coderun_boom"},
			`coderun-rpc: configuration error: CODERUN_PRELOAD="json,coderun_boom": module "coderun_boom": RuntimeError: boom at import`)
	})
	t.Run("C867/threads", func(t *testing.T) {
		fails(t, map[string]string{"CODERUN_PRELOAD": "coderun_threads"},
			`coderun-rpc: configuration error: CODERUN_PRELOAD="coderun_threads": module "coderun_threads": left 2 threads running after its import; the fork server must have one`)
	})
	t.Run("C868/address-space", func(t *testing.T) {
		fails(t, map[string]string{"CODERUN_PRELOAD": "coderun_huge", "CODERUN_ADDRESS_SPACE_MB": "360"}, ``+
			`coderun-rpc: configuration error: CODERUN_PRELOAD="coderun_huge": the preloaded fork server's address space is `)
	})
	t.Run("C869/not-installed", func(t *testing.T) {
		cmd := exec.Command(daemonBin)
		cmd.Env = environ(t, map[string]string{"CODERUN_PYTHON_BIN": py, "CODERUN_PRELOAD": "json,coderun_missing"})
		out, err := cmd.CombinedOutput()
		want := `coderun-rpc: configuration error: CODERUN_PRELOAD="json,coderun_missing": module "coderun_missing" is not installed for "` + py + `"` + "\n"
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || string(out) != want {
			t.Errorf("got %v %q, want exit 2 and %q", err, out, want)
		}
	})
	t.Run("C870/optional-and-not-held-back", func(t *testing.T) {
		d := started(t, map[string]string{"CODERUN_PYTHON_BIN": py, "CODERUN_PRELOAD": "?coderun_boom,coderun_gated"})
		// The server is held in coderun_gated's import: runs are served meanwhile.
		expectOK(t, d.run(prog("import sys\nreturn 'coderun_gated' in sys.modules")), "false")
		// C875: a session opened meanwhile waits for the server, and starts preloaded.
		open := d.request("session/open", "{}")
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		preloadReady(t, d)
		m := d.wait(open)
		var s struct{ SessionID string }
		if m.Error != nil || json.Unmarshal(m.Result, &s) != nil {
			t.Fatalf("session/open: %+v %s", m.Error, m.Result)
		}
		if r := d.srun(s.SessionID, "import sys\nreturn 'coderun_gated' in sys.modules"); string(r.Value) != "true" {
			t.Errorf("a session opened while the server preloaded starts without the preload: %s", r.Value)
		}
		if !d.stderr.logged(`msg="preload: optional module failed to import; not preloaded" module=coderun_boom err="RuntimeError: boom at import"`) {
			t.Errorf("no warning for the optional module; stderr:\n%s", d.stderr)
		}
		expectOK(t, d.run(prog("import sys\nreturn ['coderun_gated' in sys.modules, 'coderun_boom' in sys.modules]")), "[true,false]")
	})
	// After C870: the smoke run of --check imports the first module of site-packages that imports
	// (coderun_gated, which waits for its gate until then).
	t.Run("C878/check", func(t *testing.T) {
		out, err := runCheck(t, map[string]string{"CODERUN_PYTHON_BIN": py, "CODERUN_PRELOAD": "json,?coderun_nope"})
		if err != nil || !strings.Contains(string(out), "\npreload: ok (json; fork server ") ||
			!strings.Contains(string(out), `preload: optional module "coderun_nope" is not installed; not preloaded`) {
			t.Errorf("--check with a preload: %v\n%s", err, out)
		}
		out, err = runCheck(t, map[string]string{"CODERUN_PYTHON_BIN": py, "CODERUN_PRELOAD": "coderun_boom"})
		want := "preload: FAILED\ncoderun-rpc: configuration error: CODERUN_PRELOAD=\"coderun_boom\": module \"coderun_boom\": RuntimeError: boom at import\n"
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), want) {
			t.Errorf("--check with a failing preload: %v\n%s", err, out)
		}
	})
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// C877: a fork server restarted after its death whose preload now fails is
// not started again (each attempt would import the preload anew): the daemon
// logs it once, and runs go on, cold.
func TestPreloadFailsOnRestart(t *testing.T) {
	t.Parallel()
	poison := filepath.Join(t.TempDir(), "poison")
	py := preloadVenv(t, map[string]string{
		"coderun_flaky": "import os\nif os.path.exists(" + jsonQuote(poison) + "):\n    raise RuntimeError('now broken')\n",
	})
	tmp := t.TempDir()
	d := started(t, map[string]string{"CODERUN_PYTHON_BIN": py, "CODERUN_PRELOAD": "coderun_flaky", "TMPDIR": tmp})
	preloadReady(t, d)
	if err := os.WriteFile(poison, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	killForkServer(t, tmp)
	waitFor(t, func() bool {
		d.run(prog("return 1")) // a spawn finds the server gone, or failed, and starts another
		return strings.Contains(d.stderr.String(), `the preload failed; children start cold from now on`)
	}, "the restarted server's failure")
	expectOK(t, d.run(prog("import sys\nreturn 'coderun_flaky' in sys.modules")), "false")
	if n := strings.Count(d.stderr.String(), "RuntimeError: now broken"); n != 1 {
		t.Errorf("the failing preload was tried %d times, want 1; stderr:\n%s", n, d.stderr)
	}
}

// killForkServer SIGKILLs the fork server of the daemon staging in tmp.
func killForkServer(t *testing.T, tmp string) {
	t.Helper()
	for _, pid := range tmpdirProcs(tmp) {
		if isForkServer(pid) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no fork server staged in %s", tmp)
}
