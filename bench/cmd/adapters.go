package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
)

// adapterPython is the interpreter with the Python client's framework
// extras installed (make deps).
const adapterPython = ".venv/bin/python"

// adapterRows are the Python framework adapters' overhead per code tool call
// over the client's own run on the same daemon, measured by
// clients/python/bench/adapters.py (its rows: the floor is the client's own
// figure). Target: at most 1 ms more.
func adapterRows(o options) ([]row, error) {
	if _, err := os.Stat(adapterPython); err != nil {
		return nil, fmt.Errorf("%s: %w (make deps installs the frameworks)", adapterPython, err)
	}
	args := []string{"clients/python/bench/adapters.py", "--daemon", o.daemon}
	if o.quick {
		args = append(args, "--quick")
	}
	cmd := exec.Command(adapterPython, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var rows []row
	if err := json.Unmarshal(out, &rows); err != nil {
		return nil, fmt.Errorf("adapters.py printed no rows: %w", err)
	}
	for i := range rows {
		rows[i] = newRow(rows[i].Metric, rows[i].Unit, rows[i].Floor, rows[i].Daemon, rows[i].Note)
	}
	return rows, nil
}
