package main

import (
	"fmt"
	"os"
	"time"
)

// tierRows measures tier sandbox against tier process in the same run, both
// with their defaults (fork server, warm pool): warm return 1 back to back
// and the throughput of 4 callers. Both daemons run side by side, and each
// measurement alternates between them (process, sandbox, sandbox, process)
// so that a machine whose load moves treats them alike. The sandbox rows'
// ratio is sandbox / process (targets: p50 ≤ 1.5, throughput ≥ 0.7). Where
// tier sandbox cannot start (the kernel lacks a feature) there are no rows.
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
	for _, i := range []int{0, 1, 1, 0} {
		d := []*daemon{proc, sb}[i]
		_, _ = d.run("return 1", nil)
		s, err := timeN(o.samples/2, func() error { _, err := d.run("return 1", nil); return err })
		if err != nil {
			return nil, err
		}
		p50[i] = append(p50[i], s...)
		time.Sleep(refillPause) // the next daemon starts with its pool full
		r, err := throughputRow(o, d)
		if err != nil {
			return nil, err
		}
		runs[i] += r.Daemon / 2
	}
	pp, sp := ms(p50[0].pct(50)), ms(p50[1].pct(50))
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
	return append(ready, []row{
		newRow("return 1, warm, tier process, p50", "ms", 0, pp, "back to back"),
		newRow("return 1, warm, tier sandbox, p50", "ms", pp, sp, "ratio: sandbox / process (target ≤ 1.5)"),
		newRow("return 1 throughput, 4 callers, tier process", "runs/s", 0, runs[0], ""),
		newRow("return 1 throughput, 4 callers, tier sandbox", "runs/s", runs[0], runs[1], "ratio: sandbox / process (target ≥ 0.7)"),
	}...), nil
}
