package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/internal/wheeltest"
)

// Packages on demand (docs/packages.md) against the built daemon, with a
// find-links directory of tiny wheels and no index: no network.

// packagesEnv is a daemon's environment allowing tinya and tinyb from
// wheeltest.Tiny's wheels, with uv (or a wrapper of it) and a cache of the
// test's own.
func packagesEnv(t *testing.T, uv string) map[string]string {
	cache := t.TempDir()
	t.Cleanup(func() { wheeltest.Unseal(cache) })
	return map[string]string{
		"CODERUN_PACKAGES": "tinya,tinyb", "CODERUN_PACKAGE_INDEX": "none",
		"CODERUN_PACKAGE_FIND_LINKS": wheeltest.Tiny(t), "CODERUN_PACKAGE_CACHE_DIR": cache,
		"CODERUN_UV_BIN": uv,
	}
}

// installMs is a run result's stats.installMs (nil when absent).
func installMs(t *testing.T, m *msg) *int64 {
	t.Helper()
	var r struct {
		Stats struct {
			InstallMs *int64 `json:"installMs"`
		} `json:"stats"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatalf("result %s: %v", m.Result, err)
	}
	return r.Stats.InstallMs
}

// importBoth imports the set and reports where tinyb came from and whether
// the program could write beside it.
const importBoth = `import tinya, tinyb, os
try:
    open(os.path.join(os.path.dirname(tinyb.__file__), "planted.py"), "w").close()
    wrote = True
except OSError:
    wrote = False
return [tinya.A, tinyb.B, "/sets/" in tinyb.__file__, wrote]`

// C838: a run's packages are installed by the daemon, before the program,
// and imported from the cache's set; stats.installMs says how long it took;
// the same request again is served from the cache (one installation); a
// run that asks for none has no installMs. In tier sandbox the set is
// readable, not writable.
func TestPackagesRunC838(t *testing.T) {
	leakcheck.Check(t)
	uv, log := wheeltest.CountingUV(t)
	d := started(t, packagesEnv(t, uv))
	for i := range 2 {
		m := d.call("run", prog(importBoth, `"packages":["tinya","tinyb<2"]`))
		r := d.result(m)
		wrote := "true"
		if suiteTier == "sandbox" {
			wrote = "false"
		}
		expectOK(t, r, `["a1b1.0","b1.0",true,`+wrote+`]`)
		if installMs(t, m) == nil {
			t.Errorf("run %d: no stats.installMs in %s", i, m.Result)
		}
	}
	if n := wheeltest.Installs(t, log); n != 1 {
		t.Errorf("%d installations for two runs of one set", n)
	}
	m := d.call("run", prog(`import importlib.util; return importlib.util.find_spec("tinya") is None`))
	expectOK(t, d.result(m), `true`)
	if installMs(t, m) != nil {
		t.Errorf("a run without packages reports installMs: %s", m.Result)
	}
	// bindings/describe tells the model the same before it writes import (C843).
	m = d.call("bindings/describe", `{"packages":["tinya"]}`)
	if m.Error != nil || !strings.Contains(string(m.Result), `# Packages installed for this run: tinya.\n`) ||
		!strings.Contains(string(m.Result), `to import them): tinya, tinyb.\n`) {
		t.Errorf("describe: %s %+v", m.Result, m.Error)
	}
}

// C839: a name outside CODERUN_PACKAGES, or packages on a daemon without
// the feature, is −32602 naming packages[i] and the rule.
func TestPackagesRefusedC839(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, packagesEnv(t, wheeltest.UV(t)))
	for params, want := range map[string]string{
		prog(`return 1`, `"packages":["tinya","numpy"]`):              "packages[1] names numpy, which CODERUN_PACKAGES does not allow",
		prog(`return 1`, `"packages":["tinya @ file:///etc/passwd"]`): "packages[0] must be a package name with an optional version specifier (PEP 508, without URL, extras or markers)",
		`{"packages":["numpy"]}`:                                      "packages[0] names numpy, which CODERUN_PACKAGES does not allow",
	} {
		method := "run"
		if !strings.Contains(params, "program") {
			method = "session/open"
		}
		if m := d.call(method, params); m.Error == nil || m.Error.Code != -32602 || m.Error.Message != want {
			t.Errorf("%s %s: %+v, want −32602 %q", method, params, m.Error, want)
		}
	}
	off := started(t, nil)
	if m := off.call("run", prog(`return 1`, `"packages":["tinya"]`)); m.Error == nil || m.Error.Code != -32602 ||
		m.Error.Message != "packages[0] names tinya, but this daemon installs no packages (CODERUN_PACKAGES is empty)" {
		t.Errorf("feature off: %+v", m.Error)
	}
}

// C840: a set that cannot be resolved or installed (a version no wheel
// has, a name with no wheel) settles the run exception in one line naming
// the package and uv's cause; the program never runs.
func TestPackagesInstallFailureC840(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, packagesEnv(t, wheeltest.UV(t)))
	for req, cause := range map[string]string{"tinyb>=3": "you require tinyb>=3", "tinya==9": "tinya"} {
		m := d.call("run", prog(`print("ran"); return 1`, `"packages":["`+req+`"]`))
		r := d.result(m)
		if r.Error == nil || r.Error.Kind != "exception" || !strings.HasPrefix(r.Error.Message, "packages "+req+": ") ||
			!strings.Contains(r.Error.Message, cause) || strings.Contains(r.Error.Message, "\n") {
			t.Errorf("%s: %+v", req, r.Error)
		}
		if len(r.Logs) != 0 || r.Value != nil {
			t.Errorf("%s: the program ran: logs %q value %s", req, r.Logs, r.Value)
		}
		if installMs(t, m) == nil {
			t.Errorf("%s: no installMs", req)
		}
	}
}

// C841: runs racing for one set install it once, and each imports it.
func TestPackagesRacingRunsC841(t *testing.T) {
	leakcheck.Check(t)
	uv, log := wheeltest.CountingUV(t)
	env := packagesEnv(t, uv)
	env["CODERUN_MAX_CONCURRENT_RUNS"] = "4"
	d := started(t, env)
	var wg sync.WaitGroup
	results := make([]runResult, 4)
	for i := range results {
		wg.Go(func() { results[i] = d.run(prog(`import tinya; return tinya.A`, `"packages":["tinya"]`)) })
	}
	wg.Wait()
	for _, r := range results {
		expectOK(t, r, `"a1b2.0"`)
	}
	if n := wheeltest.Installs(t, log); n != 1 {
		t.Errorf("%d installations for four racing runs of one set", n)
	}
}

// C842: a session's packages, given to session/open, are importable by
// every run of the session and by its forks; a session/open whose set
// cannot be installed is refused (−32602, uv's line).
func TestPackagesSessionC842(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, packagesEnv(t, wheeltest.UV(t)))
	sid := d.open(`{"packages":["tinya","tinyb==1.0"]}`)
	expectOK(t, d.srun(sid, `x = 1; return x`).runResult, `1`)
	fork := d.fork(sid) // before anything is imported: the fork imports on its own
	r := d.srun(sid, `import tinya; return [x, tinya.A]`)
	expectOK(t, r.runResult, `[1,"a1b1.0"]`)
	if m := d.call("session/close", `{"sessionId":"`+sid+`"}`); m.Error != nil {
		t.Fatalf("session/close: %+v", m.Error)
	}
	// The source is gone; the fork's hold on the set is its own.
	expectOK(t, d.srun(fork, `import tinyb; return [x, tinyb.B]`).runResult, `[1,"b1.0"]`)
	if m := d.call("session/open", `{"packages":["tinyb>=3"]}`); m.Error == nil || m.Error.Code != -32602 ||
		!strings.HasPrefix(m.Error.Message, "packages tinyb>=3: ") {
		t.Errorf("unsatisfiable session: %+v", m.Error)
	}
}

// C846: the MCP tool run_python takes "packages": a fresh run's, and a
// named session's given by the call that opens it (a later call naming
// packages is refused: the session is open).
func TestPackagesMCPRunPythonC846(t *testing.T) {
	leakcheck.Check(t)
	cs := mcpServeEnv(t, nil, packagesEnv(t, wheeltest.UV(t)))
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "run_python" && !strings.Contains(tool.Description, `to import them): tinya, tinyb.`) {
			t.Errorf("run_python's description does not list the packages:\n%s", tool.Description)
		}
	}
	res := runPython(t, cs, map[string]any{"program": "import tinya\nreturn tinya.A", "packages": []string{"tinya"}}, nil)
	if res.IsError || !strings.Contains(text(res), `value: "a1b2.0"`) {
		t.Errorf("fresh run: isError %v, %q", res.IsError, text(res))
	}
	res = runPython(t, cs, map[string]any{"program": "return 1", "packages": []string{"numpy"}}, nil)
	if !res.IsError || !strings.Contains(text(res), "packages[0] names numpy, which CODERUN_PACKAGES does not allow") {
		t.Errorf("refused name: isError %v, %q", res.IsError, text(res))
	}
	res = runPython(t, cs, map[string]any{"program": "import tinyb\nreturn tinyb.B", "session": "s", "packages": []string{"tinyb==1.0"}}, nil)
	if res.IsError || !strings.Contains(text(res), `value: "b1.0"`) {
		t.Errorf("session open: isError %v, %q", res.IsError, text(res))
	}
	res = runPython(t, cs, map[string]any{"program": "return tinyb.B", "session": "s", "packages": []string{"tinya"}}, nil)
	if !res.IsError || !strings.Contains(text(res), "packages are installed when the session opens") {
		t.Errorf("packages on an open session: isError %v, %q", res.IsError, text(res))
	}
}

// C1234: in tier sandbox a run changes nothing of a set's bytecode or of
// what validates it: writing or renaming in __pycache__, changing a source's
// times (which would make its .pyc stale), modes, owner or extended
// attributes, and hard-linking a .pyc out of the set all fail.
func TestSetBytecodeUntouchableC1234(t *testing.T) {
	leakcheck.Check(t)
	if suiteTier != "sandbox" {
		t.Skip("tier process: the program can do what the daemon's user can (docs/packages.md)")
	}
	d := started(t, packagesEnv(t, wheeltest.UV(t)))
	m := d.call("run", prog(`import tinyb, os, glob
pkg = os.path.dirname(tinyb.__file__)
pyc = glob.glob(os.path.join(pkg, "__pycache__", "*.pyc"))[0]
done = []
for name, f in [
    ("write", lambda: open(os.path.join(pkg, "__pycache__", "x.pyc"), "w").close()),
    ("rename", lambda: os.rename(pyc, pyc + ".x")),
    ("utime", lambda: os.utime(tinyb.__file__, (0, 0))),
    ("chmod", lambda: os.chmod(pkg, 0o777)),
    ("chown", lambda: os.chown(pyc, os.getuid(), os.getgid())),
    ("setxattr", lambda: os.setxattr(pyc, "user.x", b"1")),
    ("link", lambda: os.link(pyc, "/tmp/pyc")),
]:
    try:
        f()
        done.append(name)
    except OSError:
        pass
return [len(glob.glob(os.path.join(pkg, "__pycache__", "*"))), done]`, `"packages":["tinyb"]`))
	expectOK(t, d.result(m), `[1,[]]`)
}
