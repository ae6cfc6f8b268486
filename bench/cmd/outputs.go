package main

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// The outputs group (docs/protocol-files.md §12): what files in and rich outputs
// out add to a warm run, and the daemon's memory while it returns a full
// outputs budget.

// mib1Program reads the 1 MiB CSV it was given and displays a 1 MiB PNG.
const mib1Program = `data = open("in.csv", "rb").read()
class Png:
    def _repr_png_(self):
        return b"\x89PNG\r\n\x1a\n" + bytes(1048576 - 8)
display(Png())
return len(data)`

// outputsRows: the paced warm run with a 1 MiB CSV in and a 1 MiB PNG out,
// minus a paired paced return 1; then the peak-RSS row on a daemon of its own.
func outputsRows(o options, d *daemon) ([]row, error) {
	rounds := 20
	if o.quick {
		rounds = 2
	}
	csv := strings.Repeat("1234567,89\n", 1048576/11+1)[:1048576]
	files := map[string]any{"files": []map[string]string{{"path": "in.csv", "base64": base64.StdEncoding.EncodeToString([]byte(csv))}}}
	var added samples
	for range rounds {
		b, err := pacedRun(d, "return 1", nil)
		if err != nil {
			return nil, err
		}
		t, err := pacedRun(d, mib1Program, files)
		if err != nil {
			return nil, err
		}
		added = append(added, t-b)
	}
	rss, err := outputsRSSRow(o)
	return []row{newRow("1 MiB CSV in + 1 MiB PNG out, added to a paced warm run", "ms", 0, ms(added.pct(50)),
		"target ≤ 15 ms"), rss}, err
}

// outputsRSSRow returns 8 MiB of outputs (the default budget: eight 1 MiB
// PNGs less their text/plain) from a fresh daemon and reports its peak RSS
// above its baseline after a warm-up run, in MB, as a multiple of the budget.
func outputsRSSRow(o options) (row, error) {
	d, err := startDaemon(o)
	if err != nil {
		return row{}, err
	}
	defer d.stop()
	if _, err := d.run("return 1", nil); err != nil {
		return row{}, err
	}
	time.Sleep(refillPause)
	base := d.peakRSSKb()
	r, err := d.run(`class Png:
    def _repr_png_(self):
        return b"\x89PNG\r\n\x1a\n" + bytes(1048576 - 264)
    def __repr__(self):
        return "png"
for _ in range(8):
    display(Png())
return 1`, nil)
	if err == nil && len(r.Logs) != 0 {
		err = fmt.Errorf("unexpected logs %q", r.Logs)
	}
	above := (d.peakRSSKb() - base) / 1024
	return newRow("daemon peak RSS above baseline returning 8 MiB of outputs", "MB", 8, above,
		"floor = the budget; target ratio ≤ 3"), err
}
