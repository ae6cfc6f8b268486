package config

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// C964: the interpreter lists its builtins and standard-library modules;
// an interpreter whose listing is cut short or fails is an error naming it.
func TestProbeNames(t *testing.T) {
	leakcheck.Check(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	names, err := ProbeNames(python, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"map", "open", "print", "len"} {
		if !names.Builtins[b] {
			t.Errorf("builtin %q not listed", b)
		}
	}
	for _, m := range []string{"time", "json", "os", "asyncio"} {
		if !names.Modules[m] {
			t.Errorf("module %q not listed", m)
		}
	}
	if names.Modules["numpy"] || names.Modules["coderun"] || names.Builtins["time"] {
		t.Errorf("listed a name that is neither: %v", names)
	}
	for _, out := range []string{"print len\ntime json\n", "print len\ntime json\nend\nmore\n", ""} {
		probe := func(string, []string, time.Duration, int) ([]byte, error) { return []byte(out), nil }
		if _, err := ProbeNames("/py", Options{Probe: probe}); err == nil || !strings.Contains(err.Error(), `interpreter "/py" did not list`) {
			t.Errorf("output %q: err %v", out, err)
		}
	}
}
