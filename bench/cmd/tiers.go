package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// tierRows measures tier sandbox against tier process in the same run, both
// with their defaults (fork server, warm pool): warm return 1 back to back
// and the throughput of 4 callers. Both daemons run side by side, and each
// measurement alternates between them (process, sandbox, sandbox, process)
// so that a machine whose load moves treats them alike. The sandbox rows'
// ratio is sandbox / process (targets: p50 ≤ 1.5, throughput ≥ 0.7). The
// machine's CPU per run back to back is measured alongside, since both
// targets are bound by it on a machine with few cores. Where tier sandbox
// cannot start (the kernel lacks a feature) there are no rows.
func tierRows(o options) ([]row, error) {
	proc, err := startDaemon(o, "CODERUN_ISOLATION=process")
	if err != nil {
		return nil, err
	}
	defer proc.stop()
	sb, err := startDaemon(o, "CODERUN_ISOLATION=sandbox")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: tiers: tier sandbox did not start, no rows:", err)
		return nil, nil
	}
	defer sb.stop()
	var p50 [2]samples
	var runs [2]float64
	var cpu [2]time.Duration
	for _, i := range []int{0, 1, 1, 0} {
		d := []*daemon{proc, sb}[i]
		_, _ = d.run("return 1", nil)
		c0 := othersCPU()
		s, err := timeN(o.samples/2, func() error { _, err := d.run("return 1", nil); return err })
		if err != nil {
			return nil, err
		}
		p50[i] = append(p50[i], s...)
		time.Sleep(refillPause)    // the next daemon starts with its pool full
		cpu[i] += othersCPU() - c0 // with the refill after the last run
		r, err := throughputRow(o, d)
		if err != nil {
			return nil, err
		}
		runs[i] += r.Daemon / 2
	}
	pp, sp := ms(p50[0].pct(50)), ms(p50[1].pct(50))
	perRun := func(i int) float64 { return ms(cpu[i]) / float64(len(p50[i])) }
	start, err := startupRows(o)
	if err != nil {
		return nil, err
	}
	// Paced: every run finds a warm child ready (the per-run path alone).
	var ready []row
	for i, d := range []*daemon{proc, sb} {
		floor := 0.0
		if i == 1 {
			floor = ready[0].Daemon
		}
		r, err := pacedRows(o, d, "warm pool ready, tier "+[]string{"process", "sandbox"}[i], floor)
		if err != nil {
			return nil, err
		}
		ready = append(ready, r[0])
	}
	return append(append(ready, start...), []row{
		newRow("return 1, warm, tier process, p50", "ms", 0, pp, "back to back"),
		newRow("return 1, warm, tier sandbox, p50", "ms", pp, sp, "ratio: sandbox / process (target ≤ 1.5)"),
		newRow("machine CPU per run back to back, tier process", "ms", 0, perRun(0), "every process and kernel thread, less the bench's"),
		newRow("machine CPU per run back to back, tier sandbox", "ms", perRun(0), perRun(1), "ratio: sandbox / process (the throughput target needs about 1.4)"),
		newRow("return 1 throughput, 4 callers, tier process", "runs/s", 0, runs[0], ""),
		newRow("return 1 throughput, 4 callers, tier sandbox", "runs/s", runs[0], runs[1], "ratio: sandbox / process (target ≥ 0.7)"),
	}...), nil
}

// startupRows measures a daemon's start in each tier: from spawning it to
// initialize's answer, and to the result of its first run (return 1), p50
// of starts alternating between the tiers. The sandbox rows' ratio is
// sandbox / process.
func startupRows(o options) ([]row, error) {
	n := 6
	if o.quick {
		n = 1
	}
	initialized, firstRun, err := startTimes(o, n, []string{"CODERUN_ISOLATION=process"}, []string{"CODERUN_ISOLATION=sandbox"})
	if err != nil {
		return nil, err
	}
	p50 := func(s samples) float64 { return ms(s.pct(50)) }
	return []row{
		newRow("daemon start to initialize's answer, tier process, p50", "ms", 0, p50(initialized[0]), ""),
		newRow("daemon start to initialize's answer, tier sandbox, p50", "ms", p50(initialized[0]), p50(initialized[1]), "ratio: sandbox / process"),
		newRow("daemon start to its first run's result, tier process, p50", "ms", 0, p50(firstRun[0]), "return 1"),
		newRow("daemon start to its first run's result, tier sandbox, p50", "ms", p50(firstRun[0]), p50(firstRun[1]), "return 1; ratio: sandbox / process"),
	}, nil
}

// startTimes starts a daemon n times with each of envs in turn
// (alternating) and returns, per env, the times from spawning it to
// initialize's answer and to the result of its first run (return 1).
func startTimes(o options, n int, envs ...[]string) (initialized, firstRun []samples, err error) {
	initialized, firstRun = make([]samples, len(envs)), make([]samples, len(envs))
	for range n {
		for i, env := range envs {
			t0 := time.Now()
			d, err := startDaemon(o, env...)
			if err != nil {
				return nil, nil, err
			}
			initialized[i] = append(initialized[i], time.Since(t0))
			_, err = d.run("return 1", nil)
			firstRun[i] = append(firstRun[i], time.Since(t0))
			d.stop()
			if err != nil {
				return nil, nil, err
			}
		}
	}
	return initialized, firstRun, nil
}

// othersCPU is the CPU time the whole machine has spent so far, every process
// and kernel thread (/proc/stat: user, nice, system, irq, softirq, steal), less
// this process's own; clock ticks of 10 ms, so it is summed over many runs.
// Anything else running on the machine counts too: measure on an idle one.
func othersCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // "cpu" user nice system idle iowait irq softirq steal …
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		if i < len(f) {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks)*10*time.Millisecond - processCPU(os.Getpid())
}
