package config

import (
	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
)

// defaultProbe is child.Probe: own process group, SIGKILL at the deadline,
// output pipe abandoned, at most maxOut bytes kept.
var defaultProbe ProbeFunc = child.Probe

func (o Options) sandboxProbe() func() error {
	if o.SandboxProbe != nil {
		return o.SandboxProbe
	}
	return sandbox.Probe
}

// SandboxFeature is one kernel feature tier sandbox needs (for --check).
type SandboxFeature struct {
	Name, Detail string
	OK           bool
}

// SandboxFeatures probes and reports every feature of tier sandbox.
func SandboxFeatures() []SandboxFeature {
	var out []SandboxFeature
	for _, f := range sandbox.Features() {
		out = append(out, SandboxFeature{Name: f.Name, Detail: f.Detail, OK: f.OK})
	}
	return out
}
