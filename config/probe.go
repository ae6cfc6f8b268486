package config

import (
	"sync"

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

func (o Options) interpreterTrees() func(string) ([]string, error) {
	if o.InterpreterTrees != nil {
		return o.InterpreterTrees
	}
	return sandbox.InterpreterTrees
}

// sandboxProbes are step 4's kernel feature probe and the listing of the
// interpreter's trees, which run beside the version probe (step 3): the
// three are independent, and each takes tens of milliseconds, most of it
// starting a process.
type sandboxProbes struct {
	wg          sync.WaitGroup
	featuresErr error
	trees       []string
}

// startSandboxProbes starts both probes unless isolation is "process". The
// trees are asked of abs, the interpreter as located: a shim runs the same
// interpreter that the version probe reports.
func startSandboxProbes(isolation, abs string, opts Options) *sandboxProbes {
	sb := &sandboxProbes{}
	if isolation == "process" {
		return sb
	}
	sb.wg.Go(func() { sb.featuresErr = opts.sandboxProbe()() })
	sb.wg.Go(func() {
		if trees, err := opts.interpreterTrees()(abs); err == nil {
			sb.trees = trees
		}
	})
	return sb
}

// wait waits for both probes; then featuresErr is the feature probe's
// verdict and trees the interpreter's (nil when they could not be listed,
// or were not asked).
func (sb *sandboxProbes) wait() { sb.wg.Wait() }
