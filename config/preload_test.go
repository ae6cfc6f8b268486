package config

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
)

// C871: CODERUN_PRELOAD's rule, and each module looked up in the interpreter
// without being imported: a required one that is missing is the start-up
// error naming it, an optional one is skipped (main warns).
func TestPreloadLookup(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	// The version probe is faked; the modules are looked up in a real interpreter.
	probe := func(path string, args []string, d time.Duration, max int) ([]byte, error) {
		if len(args) > 2 && args[2] == findPreloadScript {
			return child.Probe(path, args, d, max)
		}
		return fakeProbe(path, args, d, max)
	}
	lookup := func(env map[string]string) (*Config, error) {
		clearEnv(t)
		t.Setenv(VarPythonBin, python)
		for k, v := range env {
			t.Setenv(k, v)
		}
		return Load(Options{Probe: probe, SandboxProbe: sandboxPresent, InterpreterTrees: fakeTrees, NumCPU: 3})
	}
	c, err := lookup(map[string]string{VarPreload: "json,?coderun_nope,xml.etree.ElementTree,?email.mime,?xml.nope"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"json", "xml.etree.ElementTree", "?email.mime"}; !reflect.DeepEqual(c.Preload, want) {
		t.Errorf("preload %q, want %q", c.Preload, want)
	}
	if want := []string{"coderun_nope", "xml.nope"}; !reflect.DeepEqual(c.PreloadSkipped, want) {
		t.Errorf("skipped %q, want %q", c.PreloadSkipped, want)
	}
	for _, tc := range []struct{ value, mode, rule string }{
		{"json,coderun_nope", "", `module "coderun_nope" is not installed for "` + python},
		{"json,xml.nope", "", `module "xml.nope" is not installed`},
		{"json,json", "", `names module "json" twice`},
		{"json,?json", "", `names module "json" twice`},
		{"a b", "", `("a b" is not a dotted Python name;`},
		{"json,", "", `("" is not a dotted Python name;`},
		{"?", "", `("?" is not a dotted Python name;`},
		{"x..y", "", `("x..y" is not a dotted Python name;`},
		{"1x", "", `("1x" is not a dotted Python name;`},
		{"??x", "", `("??x" is not a dotted Python name;`},
		{"json", "spawn", "needs CODERUN_START_MODE=fork"},
		{strings.Repeat("m,", 64) + "m", "", "must name at most 64 modules"},
	} {
		env := map[string]string{VarPreload: tc.value}
		if tc.mode != "" {
			env[VarStartMode] = tc.mode
		}
		_, err := lookup(env)
		ce, ok := err.(*Error)
		if !ok || ce.Var != VarPreload || ce.Value != tc.value || !strings.Contains(ce.Rule, tc.rule) {
			t.Errorf("%q: %v, want a %s error containing %q", tc.value, err, VarPreload, tc.rule)
		}
	}
}
