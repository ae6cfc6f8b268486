package wheelset

import (
	"strings"
	"testing"
)

// C830: a requested package is a name with an optional version specifier
// and nothing else; the name is kept in its normal form.
func TestParseRequirementC830(t *testing.T) {
	good := map[string]Requirement{
		"requests":           {Name: "requests"},
		"Scipy==1.14.1":      {Name: "scipy", Spec: "==1.14.1"},
		"numpy >= 1.26, <2":  {Name: "numpy", Spec: ">=1.26,<2"},
		"zope.interface~=6":  {Name: "zope-interface", Spec: "~=6"},
		"a_b-c.d!=1.*":       {Name: "a-b-c-d", Spec: "!=1.*"},
		"x===1.0+local":      {Name: "x", Spec: "===1.0+local"},
		"typing_extensions":  {Name: "typing-extensions"},
		"A":                  {Name: "a"},
		"pkg>1.0.post1.dev2": {Name: "pkg", Spec: ">1.0.post1.dev2"},
	}
	for in, want := range good {
		got, err := ParseRequirement(in)
		if err != nil || got != want {
			t.Errorf("ParseRequirement(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	bad := []string{"", "../x", "/etc/passwd", "x @ https://evil/x.whl", "x@file:///tmp/x.whl",
		"x[socks]", "x; python_version>'3'", "x>=1;os_name=='nt'", "-e x", "--index-url=http://evil",
		"x==", "x>=1,", "x 1.0", ".x", "x.", "x\n", "x==1\ny", "x==$(id)", "x==1 #c", "é",
		"./x.whl", "x==1/../..", strings.Repeat("a", MaxRequirementBytes+1), "x>=-1"}
	for _, in := range bad {
		if r, err := ParseRequirement(in); err == nil {
			t.Errorf("ParseRequirement(%q) = %+v, want refused", in, r)
		}
	}
}

// C831: CODERUN_PACKAGES: names, ranges whose commas stay with their entry, "*".
func TestParseAllowListC831(t *testing.T) {
	a, err := ParseAllowList("numpy>=1.26,<2, Scipy ,tiny_b")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"numpy": true, "scipy": true, "tiny-b": true, "pandas": false} {
		if a.Allows(name) != want {
			t.Errorf("Allows(%q) = %v", name, !want)
		}
	}
	if c := a.Constraints(); len(c) != 1 || c[0].String() != "numpy>=1.26,<2" {
		t.Errorf("constraints %v", c)
	}
	if got := strings.Join(a.Describe(), " "); got != "numpy>=1.26,<2 scipy tiny-b" {
		t.Errorf("Describe = %q", got)
	}
	if off, _ := ParseAllowList(""); off.Enabled() || off.Allows("x") {
		t.Error("the empty list allows something")
	}
	if any, _ := ParseAllowList("*"); !any.Allows("whatever") {
		t.Error("* does not allow any name")
	}
	for _, bad := range []string{"x @ http://e/x.whl", "../x", "x[y]", ">=1"} {
		if _, err := ParseAllowList(bad); err == nil {
			t.Errorf("ParseAllowList(%q) accepted", bad)
		}
	}
}
