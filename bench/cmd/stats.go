package main

import (
	"fmt"
	"sort"
	"time"
)

// row is one line of the table: a metric, its floor (0 when none applies),
// the daemon's figure, and their ratio.
type row struct {
	Metric string  `json:"metric"`
	Unit   string  `json:"unit"`
	Floor  float64 `json:"floor,omitempty"`
	Daemon float64 `json:"daemon"`
	Ratio  float64 `json:"ratio,omitempty"`
	Note   string  `json:"note,omitempty"`
}

func newRow(metric, unit string, floor, daemon float64, note string) row {
	r := row{Metric: metric, Unit: unit, Floor: floor, Daemon: daemon, Note: note}
	if floor > 0 {
		r.Ratio = daemon / floor
	}
	return r
}

// samples holds durations and reports percentiles.
type samples []time.Duration

func (s samples) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := append(samples(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	i := int(p / 100 * float64(len(c)-1))
	return c[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// timeN runs f n times and returns the durations.
func timeN(n int, f func() error) (samples, error) {
	out := make(samples, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func printTable(rows []row) {
	fmt.Printf("%-44s %-6s %12s %12s %8s  %s\n", "metric", "unit", "floor", "daemon", "ratio", "note")
	for _, r := range rows {
		floor, ratio := "-", "-"
		if r.Floor > 0 {
			floor = fmt.Sprintf("%.3f", r.Floor)
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
		}
		fmt.Printf("%-44s %-6s %12s %12.3f %8s  %s\n", r.Metric, r.Unit, floor, r.Daemon, ratio, r.Note)
	}
}
