package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every byte of display() billed before the daemon holds it (docs/protocol.md
// §12.4): MIME types, values and a fixed overhead per output, a cap on MIME
// types per output and on outputs per run.

// vmHWMKB is the peak resident set (VmHWM) of pid in KiB.
func vmHWMKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			n, _ := strconv.Atoi(strings.Fields(line)[1])
			return n
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// heldBound is what the daemon may hold beyond the outputs budget over one
// test's runs: buffers and the garbage collector's slack.
const heldBound = 48 << 20

// C440: a _repr_mimebundle_ of 5 000 long MIME types with empty values, shown
// 60 times, and the same bundle forged as raw output frames: the response
// stays within the budget plus the logs, and the daemon's peak RSS within the
// budget plus a fixed bound; the cut bundle leaves a log line, the budget the
// marker.
func TestDisplayManyMimeTypesBilled(t *testing.T) {
	t.Parallel()
	const budget = 1 << 20
	d := started(t, map[string]string{"CODERUN_MAX_OUTPUT_BYTES": strconv.Itoa(budget), "CODERUN_ADDRESS_SPACE_MB": "2048"})
	before := vmHWMKB(t, d.cmd.Process.Pid)
	marker := "[coderun] outputs truncated at " + strconv.Itoa(budget) + " bytes"
	for i, program := range []string{`class K:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/x-%05d-%s" % (i, "k" * 300): "" for i in range(5000)}
for _ in range(60):
    display(K())
return 1`, `import os
frame = b'{"type":"output","data":{' + b",".join(b'"text/x-%05d-%s":""' % (i, b"k" * 300) for i in range(5000)) + b'}}\n'
for _ in range(60):
    for i in range(0, len(frame), 65536):
        os.write(3, frame[i:i + 65536])
display("after")
return 1`} {
		m := d.call("run", prog(program))
		if len(m.raw) > budget+65536+4096 {
			t.Fatalf("response of %d bytes for an outputs budget of %d", len(m.raw), budget)
		}
		res := d.filesRun(prog(program)) // once more, decoded
		expectOK(t, res.runResult, `1`)
		if n := len(res.Outputs); n == 0 || res.Outputs[n-1].Data["text/plain"] != marker || i == 1 && n != 1 {
			t.Fatalf("program %d: %d outputs", i, n)
		}
		if i == 0 && !strings.Contains(strings.Join(res.Logs, "\n"), "MIME types") {
			t.Fatalf("no log line for the cut bundle: %q", res.Logs)
		}
	}
	grew := (vmHWMKB(t, d.cmd.Process.Pid) - before) << 10
	if grew > budget+heldBound {
		t.Fatalf("daemon peak RSS grew by %d bytes for an outputs budget of %d", grew, budget)
	}
	t.Logf("daemon peak RSS grew by %d bytes", grew)
}

// C441: 200 000 displays of an object whose repr is empty are billed: the
// count cap keeps 10 000 and ends them with the marker naming it; under a
// small budget the fixed overhead per output ends them sooner with the
// byte marker.
func TestDisplayEmptyOutputsBilled(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	program := `class E:
    def __repr__(self):
        return ""
e = E()
for _ in range(200000):
    display(e)
return 1`
	r := d.filesRun(prog(program))
	expectOK(t, r.runResult, `1`)
	if n := len(r.Outputs); n != 10001 || r.Outputs[n-1].Data["text/plain"] != "[coderun] outputs truncated at 10000 outputs" {
		t.Fatalf("%d outputs, last %+v", n, r.Outputs[len(r.Outputs)-1])
	}
	r = d.filesRun(prog(program, `"limits":{"maxOutputBytes":5000}`))
	expectOK(t, r.runResult, `1`)
	// Each costs 32 + 8 + len("text/plain") = 50 bytes: 100 fit.
	if n := len(r.Outputs); n != 101 || r.Outputs[n-1].Data["text/plain"] != "[coderun] outputs truncated at 5000 bytes" {
		t.Fatalf("%d outputs, last %+v", n, r.Outputs[len(r.Outputs)-1])
	}
}

// C446: a child that writes the head of a huge frame and then its body in
// pieces: an output frame past what is left of the outputs budget, a log
// frame past the ledger, a done frame past six times maxValueBytes, and a
// frame that does not declare its type first are each refused once they pass
// their room and drained without being held; each ends as one that does not
// fit would (marker, log marker, output-limit, dropped) and the daemon's peak
// RSS stays within the budgets plus a fixed bound.
func TestHugeFrameNotHeld(t *testing.T) {
	t.Parallel()
	const budget = 1 << 20
	d := started(t, map[string]string{"CODERUN_MAX_OUTPUT_BYTES": strconv.Itoa(budget), "CODERUN_ADDRESS_SPACE_MB": "2048"})
	before := vmHWMKB(t, d.cmd.Process.Pid)
	send := func(head, tail string) string {
		return `import os
os.write(3, b'` + head + `')
piece = b"x" * (1 << 20)
for _ in range(60):
    os.write(3, piece)
os.write(3, b'` + tail + `\n')
`
	}
	held := func(what string) {
		t.Helper()
		grew := (vmHWMKB(t, d.cmd.Process.Pid) - before) << 10
		if grew > budget+hugeFrameBound {
			t.Fatalf("%s: daemon peak RSS grew by %d bytes for an outputs budget of %d", what, grew, budget)
		}
		t.Logf("%s: daemon peak RSS grew by %d bytes", what, grew)
	}
	marker := "[coderun] outputs truncated at " + strconv.Itoa(budget) + " bytes"
	r := d.filesRun(prog(send(`{"type":"output","data":{"text/plain":"`, `"}}`) + `display("after")
return 1`))
	expectOK(t, r.runResult, `1`)
	held("output frame")
	if len(r.Outputs) != 1 || r.Outputs[0].Data["text/plain"] != marker {
		t.Fatalf("output frame: outputs %+v", r.Outputs)
	}
	r = d.filesRun(prog(send(`{"data":{"text/plain":"`, `"},"type":"output"}`) + `display("after")
return 2`))
	expectOK(t, r.runResult, `2`)
	if len(r.Outputs) != 1 || r.Outputs[0].Data["text/plain"] != "'after'" {
		t.Fatalf("type last: outputs %+v", r.Outputs)
	}
	r = d.filesRun(prog(`print("before")
` + send(`{"type":"log","text":"`, `"}`) + `return 3`))
	expectOK(t, r.runResult, `3`)
	if len(r.Logs) != 2 || r.Logs[0] != "before" || r.Logs[1] != "[coderun] log capture truncated at 65536 bytes" {
		t.Fatalf("log frame: logs %q", r.Logs)
	}
	r = d.filesRun(prog(send(`{"type":"done","value":"`, `"}`) + `return 4`))
	if r.Error == nil || r.Error.Kind != "output-limit" || r.Error.Message != "completion value exceeded 32768 bytes" {
		t.Fatalf("done frame: %+v", r.runResult)
	}
	held("every frame")
}

// hugeFrameBound is what the daemon may hold beyond the outputs budget while
// refusing 60 MiB frames: the probe, read buffers and the collector's slack.
const hugeFrameBound = 24 << 20

// C448: forged call frames of 1 MiB each that the client never answers: the
// daemon keeps each call in flight but not its arguments once they are sent,
// so its peak RSS does not grow with the calls waiting.
func TestInFlightCallsHoldNoArguments(t *testing.T) {
	t.Parallel()
	const calls, argBytes = 48, 1 << 20
	d := started(t, map[string]string{"CODERUN_ADDRESS_SPACE_MB": "2048"})
	d.behave("hang", hang)
	before := vmHWMKB(t, d.cmd.Process.Pid)
	id := d.request("run", prog(`import os, threading
arg = b'"' + b"x" * `+strconv.Itoa(argBytes)+` + b'"'
for i in range(`+strconv.Itoa(calls)+`):
    os.write(3, b'{"type":"call","id":%d,"global":"tools","name":"hang","args":' % i + arg + b'}\n')
threading.Event().wait()`, bindTools, `"limits":{"maxWallMs":120000}`))
	seen := func() (n int) {
		for _, e := range d.snapshot() {
			if e.m.Method == "binding/call" {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(2 * time.Minute); seen() < calls; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) { // 48 MiB of calls under -race and a loaded machine
			t.Fatalf("%d of %d calls reached the client", seen(), calls)
		}
	}
	grew := (vmHWMKB(t, d.cmd.Process.Pid) - before) << 10
	d.notify("$/cancelRequest", `{"id":`+id+`}`)
	d.wait(id)
	if grew > calls*argBytes { // the arguments alone, were they kept
		t.Fatalf("daemon peak RSS grew by %d bytes with %d calls of %d bytes in flight", grew, calls, argBytes)
	}
	t.Logf("daemon peak RSS grew by %d bytes", grew)
}
