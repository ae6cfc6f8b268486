package wire

import (
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/wheelset"
)

// noPackages is the allow-list of a daemon with packages on demand off.
var noPackages = wheelset.AllowList{}

// C837: "packages" on run and session/open: strings, valid requirements,
// allowed names, once each, at most wheelset.MaxRequirements; refusals
// name packages[i] and the rule.
func TestValidatePackagesC837(t *testing.T) {
	allow, err := wheelset.ParseAllowList("tinya,tiny-b>=1")
	if err != nil {
		t.Fatal(err)
	}
	many := `"tinya"` + strings.Repeat(`,"tinya"`, wheelset.MaxRequirements)
	for _, c := range []struct{ packages, msg string }{
		{`"tinya"`, "packages must be an array of strings"},
		{`[1]`, "packages[0] must be a string"},
		{`["tinya","../x"]`, "packages[1] " + wheelset.RequirementRule},
		{`["tinya @ https://evil.example/t.whl"]`, "packages[0] " + wheelset.RequirementRule},
		{`["tinya; os_name == 'posix'"]`, "packages[0] " + wheelset.RequirementRule},
		{`["numpy"]`, "packages[0] names numpy, which CODERUN_PACKAGES does not allow"},
		{`["tinya","TinyA==1"]`, "packages[1] names tinya a second time"},
		{`[` + many + `]`, "packages must have at most 64 entries"},
	} {
		params := `{"program":"","packages":` + c.packages + `}`
		if _, err := ValidateRun([]byte(params), cfgLimits, allow); err == nil || err.Error() != c.msg {
			t.Errorf("run %s: %v, want %q", c.packages, err, c.msg)
		}
		if _, err := ValidateSessionOpen([]byte(`{`+params[len(`{"program":"",`):]), cfgLimits, 1000, allow, nil); err == nil || err.Error() != c.msg {
			t.Errorf("session/open %s: %v, want %q", c.packages, err, c.msg)
		}
	}
	p, err := ValidateRun([]byte(`{"program":"","packages":["Tiny_B >= 1.0","tinya"]}`), cfgLimits, allow)
	if err != nil || strings.Join(p.Packages, " ") != "tiny-b>=1.0 tinya" {
		t.Errorf("valid packages: %v %q", err, p.Packages)
	}
	if _, err := ValidateRun([]byte(`{"program":"","packages":["tinya"]}`), cfgLimits, noPackages); err == nil ||
		err.Error() != "packages[0] names tinya, but this daemon installs no packages (CODERUN_PACKAGES is empty)" {
		t.Errorf("feature off: %v", err)
	}
	if p, err := ValidateRun([]byte(`{"program":"","packages":null}`), cfgLimits, noPackages); err != nil || p.Packages != nil {
		t.Errorf("null packages: %v %q", err, p.Packages)
	}
	if _, err := ValidateRun([]byte(`{"program":"","sessionId":"s","packages":["tinya"]}`), cfgLimits, allow); err == nil ||
		err.Error() != "packages are given to session/open for every run of the session" {
		t.Errorf("session run: %v", err)
	}
}

// C843: the bindings/describe header says what a run may import: the
// modules the fork server preloaded, the packages the request names and
// what the allow-list offers; a daemon with neither renders the header
// unchanged.
func TestDescribeListsPackagesC843(t *testing.T) {
	stubs := "# coderun-rpc: the functions …\n# Python 3.11.7. Every function is async: await it.\n\nclass Tools:\n"
	allow, _ := wheelset.ParseAllowList("tinyb<2,tinya")
	got := WithImports(stubs, nil, []string{"tinya"}, allow)
	want := "# coderun-rpc: the functions …\n# Python 3.11.7. Every function is async: await it.\n" +
		"# Packages installed for this run: tinya.\n" +
		`# Packages installable on demand (name them in the run's "packages" to import them): tinya, tinyb<2.` + "\n\nclass Tools:\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	anyName, _ := wheelset.ParseAllowList("*")
	if got := WithImports(stubs, nil, nil, anyName); !strings.Contains(got, `# Any package of the index can be installed: name it in the run's "packages" before importing it.`+"\n\n") {
		t.Errorf("*: %s", got)
	}
	if got := WithImports(stubs, nil, nil, noPackages); got != stubs {
		t.Errorf("feature off: %s", got)
	}
	preloaded := WithImports(stubs, []string{"numpy", "pandas"}, nil, noPackages)
	if want := "# Python 3.11.7. Every function is async: await it.\n# Preloaded, so importing them costs nothing: numpy, pandas.\n\nclass"; !strings.Contains(preloaded, want) {
		t.Errorf("a preload: %s", preloaded)
	}
	if _, err := ValidateDescribe([]byte(`{"packages":["numpy"]}`), cfgLimits, allow, nil); err == nil ||
		err.Error() != "packages[0] names numpy, which CODERUN_PACKAGES does not allow" {
		t.Errorf("describe's packages: %v", err)
	}
}
