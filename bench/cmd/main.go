// Command bench measures coderun-rpc side by side with the floor it cannot
// beat, in one run on one machine: a bare interpreter spawn, a raw Go↔Python
// JSON-lines round trip, a pre-started child answering a run, and a raw
// JSON-RPC round trip over stdio. It prints a table of ratios and writes it as
// JSON under bench/results/.
//
//	go run ./bench/cmd            # the full run (make bench)
//	go run ./bench/cmd -quick     # tiny counts, a smoke test that keeps it from rotting
//	go run ./bench/cmd -baseline old/coderun-rpc   # same-run A/B against another build
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/mcptest"
)

type options struct {
	quick    bool
	daemon   string
	baseline string
	python   string
	// workloadPython runs the workloads group (pandas, matplotlib).
	workloadPython string
	outDir         string
	only           *regexp.Regexp
	samples        int
}

func main() {
	mcptest.MaybeServe() // the upstream of the mcp groups
	if len(os.Args) > 1 && os.Args[1] == "-echo-server" {
		echoServer()
		return
	}
	var o options
	flag.BoolVar(&o.quick, "quick", false, "tiny counts (smoke test)")
	flag.StringVar(&o.daemon, "daemon", "bin/coderun-rpc", "daemon binary")
	flag.StringVar(&o.python, "python", "python3", "interpreter (shims are resolved)")
	flag.StringVar(&o.workloadPython, "workload-python", ".venv/bin/python", "interpreter of the workloads group, with pandas and matplotlib (ipykernel and jupyter_client for its Jupyter reference)")
	flag.StringVar(&o.outDir, "out", "bench/results", "directory for the JSON table ('' to skip)")
	flag.StringVar(&o.baseline, "baseline", "", "another daemon binary: measure both, interleaved, and report daemon/baseline ratios")
	only := flag.String("only", "", "regexp of the measurement groups to run ("+strings.Join(groupNames, ", ")+"); floors always run")
	flag.Parse()
	var err error
	if o.only, err = regexp.Compile(*only); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -only:", err)
		os.Exit(2)
	}
	o.samples = 200
	if o.quick {
		o.samples = 5
	}
	if err = run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	py, err := realPython(o.python)
	if err != nil {
		return err
	}
	o.python = py
	floors, err := measureFloors(o)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	var table any
	if o.baseline != "" {
		rows, err := measureAB(o, floors)
		if err != nil {
			return fmt.Errorf("A/B: %w", err)
		}
		printAB(rows)
		table = rows
	} else {
		rows, err := measureDaemon(o, floors)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		printTable(rows)
		table = rows
	}
	if o.outDir == "" || o.quick {
		return nil
	}
	return writeJSON(o.outDir, table)
}

// realPython resolves a pyenv/asdf shim to the interpreter it runs.
func realPython(name string) (string, error) {
	out, err := exec.Command(name, "-I", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("probe %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func writeJSON(dir string, rows any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	host, _ := os.Hostname()
	doc := map[string]any{"date": time.Now().UTC().Format(time.RFC3339), "host": host, "rows": rows}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	name := filepath.Join(dir, "bench-"+time.Now().UTC().Format("20060102-150405")+".json")
	if err := os.WriteFile(name, append(data, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Println("wrote", name)
	return nil
}
