package e2e

import (
	"testing"
)

// In tier sandbox the CPU budget bounds the run, all its processes
// together: four forked burners under cpuSeconds 2 (each of which
// RLIMIT_CPU alone would let run 2 s) end the run as a CPU timeout near 2 s
// of the run's CPU, on a warm child as on a cold one.
func TestSandboxRunCPUBudget(t *testing.T) {
	t.Parallel()
	for _, pool := range []string{"0", "1"} {
		t.Run("warm pool "+pool, func(t *testing.T) {
			d := started(t, map[string]string{"CODERUN_ISOLATION": "sandbox", "CODERUN_WARM_POOL": pool})
			r := d.run(prog(`import os
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        while True:
            pass
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
return "finished"`, `"limits":{"cpuSeconds":2,"maxWallMs":30000}`))
			expectFailure(t, r, "timeout", "CPU time exhausted (limit at most 2s; a stricter inherited RLIMIT_CPU can fire sooner)")
			if r.Error.Budget != "cpu" {
				t.Errorf("budget %q, want cpu", r.Error.Budget)
			}
			if r.Stats.CPUMs < 2000 || r.Stats.CPUMs > 3500 {
				t.Errorf("stats.cpuMs %d, want the run's CPU, near the 2 s budget (4 × 2 s without the run-wide bound)", r.Stats.CPUMs)
			}
		})
	}
}
