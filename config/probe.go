package config

import "github.com/coderun-rpc/coderun-rpc/child"

// defaultProbe is child.Probe: own process group, SIGKILL at the deadline,
// output pipe abandoned, at most maxOut bytes kept.
var defaultProbe ProbeFunc = child.Probe

func (o Options) sandboxProbe() func() error {
	if o.SandboxProbe != nil {
		return o.SandboxProbe
	}
	return child.ProbeSandbox
}
