package e2e

import (
	"strings"
	"testing"
)

// plotProgram plots, shows the figure and returns where matplotlib keeps its
// cache, whether that is MPLCONFIGDIR, and whether its font list is there.
const plotProgram = `import glob, os
import matplotlib
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.show()
cache = matplotlib.get_cachedir()
return [cache == os.path.realpath(os.environ.get("MPLCONFIGDIR", "")), len(glob.glob(os.path.join(cache, "fontlist-*.json")))]`

// expectCleanPlot runs plotProgram and checks that the run displayed its
// figure, used the daemon's built directory, and that its logs say nothing
// of matplotlib.
func expectCleanPlot(t *testing.T, d *daemon) {
	t.Helper()
	r := d.filesRun(prog(plotProgram))
	if len(r.Outputs) != 1 {
		t.Errorf("plt.show() displayed %d outputs, want 1", len(r.Outputs))
	}
	if r.Error != nil || string(r.Value) != "[true,1]" {
		t.Errorf("plotting run: %s %+v, logs %q", r.Value, r.Error, r.Logs)
	}
	for _, l := range r.Logs {
		if strings.Contains(strings.ToLower(l), "matplotlib") || strings.Contains(l, "mkdir -p failed") {
			t.Errorf("a plotting run's logs: %q", r.Logs)
			break
		}
	}
}

// C872: the daemon's matplotlib directory (docs/containment.md §4.5) is
// built once at start-up; plotting runs use it, read-only in tier sandbox,
// without a warning in their logs or a font cache of their own.
func TestMatplotlibConfigDir(t *testing.T) {
	t.Parallel()
	py := venvPython(t, "matplotlib")
	d := started(t, map[string]string{"CODERUN_PYTHON_BIN": py})
	waitFor(t, func() bool { return d.stderr.logged("matplotlib: font cache built; runs use it") }, "the font cache")
	expectCleanPlot(t, d)
	expectCleanPlot(t, d)
	if suiteTier == "sandbox" {
		r := d.run(prog("import os\nopen(os.path.join(os.environ['MPLCONFIGDIR'], 'matplotlibrc'), 'w')"))
		if r.Error == nil || r.Error.ExceptionType == nil || *r.Error.ExceptionType != "PermissionError" {
			t.Errorf("a run wrote the daemon's matplotlib directory: %+v", r.Error)
		}
	}
}
