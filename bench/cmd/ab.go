package main

import (
	"fmt"
	"regexp"
)

// groupNames are the measurement groups of measureGroups, in its order.
var groupNames = []string{"cold", "cold-spawn", "warm", "paced", "paced-tmpfs", "bindings", "logs",
	"throughput", "throughput-spawn", "typed-bindings", "describe", "typed-declare", "outputs",
	"mcp-calls", "mcp-list", "session", "session-state", "session-fork", "session-idle", "tiers",
	"serve-unix", "serve-fanout", "serve-idle", "serve-load", "packages", "egress", "workloads", "adapters", "preload", "go-client"}

// abRow is one metric measured on the baseline daemon and on o.daemon.
type abRow struct {
	Metric   string  `json:"metric"`
	Unit     string  `json:"unit"`
	Baseline float64 `json:"baseline"`
	Daemon   float64 `json:"daemon"`
	Ratio    float64 `json:"ratio"`
}

// measureAB measures every selected group on both daemons in the order
// baseline, daemon, daemon, baseline, so that a machine drifting during the
// run weighs on both alike, and reports each metric as the mean of its two
// runs per daemon with the ratio daemon / baseline.
func measureAB(o options, f floors) ([]abRow, error) {
	var out []abRow
	for _, g := range groupNames {
		if !o.only.MatchString(g) {
			continue
		}
		one := o
		one.only = regexp.MustCompile("^" + regexp.QuoteMeta(g) + "$")
		sums := map[string]*abRow{}
		var order []string
		for i, bin := range []string{o.baseline, o.daemon, o.daemon, o.baseline} {
			one.daemon = bin
			isBaseline := i == 0 || i == 3
			rows, err := measureGroups(one, f)
			if err != nil {
				return nil, fmt.Errorf("%s (%s): %w", g, bin, err)
			}
			for _, r := range rows {
				s := sums[r.Metric]
				if s == nil {
					s = &abRow{Metric: r.Metric, Unit: r.Unit}
					sums[r.Metric] = s
					order = append(order, r.Metric)
				}
				if isBaseline {
					s.Baseline += r.Daemon / 2
				} else {
					s.Daemon += r.Daemon / 2
				}
			}
		}
		for _, m := range order {
			s := sums[m]
			if s.Baseline > 0 {
				s.Ratio = s.Daemon / s.Baseline
			}
			out = append(out, *s)
		}
	}
	return out, nil
}

func printAB(rows []abRow) {
	fmt.Printf("%-52s %-6s %12s %12s %8s\n", "metric", "unit", "baseline", "daemon", "ratio")
	for _, r := range rows {
		fmt.Printf("%-52s %-6s %12.3f %12.3f %7.2fx\n", r.Metric, r.Unit, r.Baseline, r.Daemon, r.Ratio)
	}
}
