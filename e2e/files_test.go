package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Files in, files and rich outputs out (docs/protocol-files.md §12), against the
// built daemon and a real python3.

type outFile struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Base64  string `json:"base64"`
	Omitted bool   `json:"omitted"`
}

type output struct {
	Data map[string]string `json:"data"`
}

type filesResult struct {
	runResult
	Outputs []output  `json:"outputs"`
	Files   []outFile `json:"files"`
}

// filesRun is run, also decoding outputs and files.
func (d *daemon) filesRun(params string) filesResult {
	d.t.Helper()
	m := d.call("run", params)
	r := filesResult{runResult: d.result(m)}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		d.t.Fatalf("run result %s: %v", m.Result, err)
	}
	return r
}

func (f outFile) bytes(t *testing.T) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(f.Base64)
	if err != nil {
		t.Fatalf("%s: %v", f.Path, err)
	}
	return b
}

// C403: files are written before the program starts; out/ comes back sorted
// by path, regular files only (a link to a file outside, a FIFO and a link to
// a folder are skipped); displayed objects come back in order.
func TestFilesInAndOut(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	r := d.filesRun(prog(`import os
assert sorted(os.listdir("out")) == []
data = open("data/in.csv").read()
blob = open("bin/blob", "rb").read()
os.makedirs("out/sub")
open("out/sub/z.bin", "wb").write(blob)
open("out/a-c.txt", "w").write(data.upper())
open("out/empty", "w").close()
os.symlink("/etc/passwd", "out/passwd")
os.symlink("/", "out/root")
os.mkfifo("out/fifo")
display("shown", {"k": 1})
return [data, len(blob)]`, `"files":[{"path":"data/in.csv","text":"a,b\n1,2\n"},{"path":"./bin//blob","base64":"AAEC/w=="}]`))
	expectOK(t, r.runResult, `["a,b\n1,2\n",4]`)
	var paths []string
	for _, f := range r.Files {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, " ") != "out/a-c.txt out/empty out/sub/z.bin" {
		t.Fatalf("files %v", paths)
	}
	if got := string(r.Files[0].bytes(t)); got != "A,B\n1,2\n" || r.Files[0].Size != 8 {
		t.Errorf("out/a-c.txt = %q (size %d)", got, r.Files[0].Size)
	}
	if got := r.Files[2].bytes(t); !bytes.Equal(got, []byte{0, 1, 2, 255}) {
		t.Errorf("out/sub/z.bin = %v", got)
	}
	if len(r.Outputs) != 2 || r.Outputs[0].Data["text/plain"] != "'shown'" || r.Outputs[1].Data["text/plain"] != "{'k': 1}" {
		t.Errorf("outputs %+v", r.Outputs)
	}
}

// C404: the display protocol: a mime bundle, the _repr_*_ methods in order, a
// method that raises or returns the wrong type is skipped with a log line, and
// text/plain is always there.
func TestDisplayProtocol(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	r := d.filesRun(prog(`class Rich:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/markdown": "**b**"}
    def _repr_png_(self):
        return b"\x89PNG\r\n\x1a\n"
    def _repr_svg_(self):
        return "<svg/>"
    def _repr_json_(self):
        return {"x": [1, 2]}
    def _repr_html_(self):
        raise ValueError("boom")
    def _repr_jpeg_(self):
        return 42
    def __repr__(self):
        return "Rich()"
display(Rich())`))
	expectOK(t, r.runResult, `null`)
	want := map[string]string{"text/markdown": "**b**", "image/png": base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n")),
		"image/svg+xml": "<svg/>", "application/json": `{"x":[1,2]}`, "text/plain": "Rich()"}
	if len(r.Outputs) != 1 || !equalMaps(r.Outputs[0].Data, want) {
		t.Fatalf("outputs %+v", r.Outputs)
	}
	logs := strings.Join(r.Logs, "\n")
	for _, w := range []string{"Rich._repr_html_() raised ValueError: boom", "the image/jpeg of a Rich is int, not bytes; skipped"} {
		if !strings.Contains(logs, w) {
			t.Errorf("logs %q lack %q", r.Logs, w)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// C405: one budget over outputs then files, in production order: the first
// item that does not fit and everything after it is dropped, the marker is
// the last output, dropped files are listed as omitted; the run still succeeds.
func TestOutputBudget(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_MAX_OUTPUT_BYTES": "100"})
	r := d.filesRun(prog(`display("a" * 40)
open("out/b.txt", "w").write("b" * 60)
open("out/c.txt", "w").write("c" * 5)
return 1`))
	expectOK(t, r.runResult, `1`)
	marker := "[coderun] outputs truncated at 100 bytes"
	if len(r.Outputs) != 2 || r.Outputs[1].Data["text/plain"] != marker {
		t.Fatalf("outputs %+v", r.Outputs)
	}
	want := []outFile{{Path: "out/b.txt", Size: 60, Omitted: true}, {Path: "out/c.txt", Size: 5, Omitted: true}}
	if len(r.Files) != 2 || r.Files[0] != want[0] || r.Files[1] != want[1] {
		t.Fatalf("files %+v", r.Files)
	}
	r = d.filesRun(prog(`display("x" * 20)
display("y" * 200)
display("z")
open("out/f", "w").write("f")`, `"limits":{"maxOutputBytes":100}`))
	// display("x" * 20) costs 32 + 8 + len("text/plain") + 22 = 72 (docs/protocol-files.md §12.4).
	if len(r.Outputs) != 2 || r.Outputs[1].Data["text/plain"] != "[coderun] outputs truncated at 100 bytes" ||
		len(r.Files) != 1 || !r.Files[0].Omitted {
		t.Fatalf("outputs %+v files %+v", r.Outputs, r.Files)
	}
}

// C406: with stream true, run/output notifications arrive in order with
// run/log, the marker last, all before the response.
func TestOutputStreamOrder(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_MAX_OUTPUT_BYTES": "80"})
	id := d.request("run", prog(`print("one")
display("two")
print("three")
open("out/big", "w").write("x" * 100)`, `"stream":true`))
	d.wait(id)
	var seq []string
	for _, e := range d.snapshot() {
		var p struct {
			Text string            `json:"text"`
			Data map[string]string `json:"data"`
		}
		json.Unmarshal(e.m.Params, &p)
		switch e.m.Method {
		case "run/log":
			seq = append(seq, "log:"+p.Text)
		case "run/output":
			seq = append(seq, "output:"+p.Data["text/plain"])
		}
		if string(e.m.ID) == id {
			seq = append(seq, "result")
		}
	}
	want := "log:one|output:'two'|log:three|output:[coderun] outputs truncated at 80 bytes|result"
	if got := strings.Join(seq, "|"); got != want {
		t.Fatalf("sequence\n got %s\nwant %s", got, want)
	}
}

// C407: a program that replaces out/ with a link (to / or to /dev/zero), or
// leaves a FIFO in it, gets no files back and the daemon reads nothing
// outside the run directory.
func TestOutReplaced(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	for _, program := range []string{
		`import os; os.rmdir("out"); os.symlink("/", "out")`,
		`import os; os.rmdir("out"); os.symlink("/dev/zero", "out")`,
		`import os; os.rmdir("out"); os.mkfifo("out")`,
		`import os; os.mkfifo("out/pipe"); os.symlink("/dev/zero", "out/zero")`,
	} {
		r := d.filesRun(prog(program + "\nreturn 1"))
		expectOK(t, r.runResult, `1`)
		if len(r.Files) != 0 || len(r.Outputs) != 0 {
			t.Errorf("%s: files %+v outputs %+v", program, r.Files, r.Outputs)
		}
	}
}

// C416: a program that leaves more than 10 000 files in out/ gets 10 000
// listed and the marker; a huge text repr is never encoded either.
func TestOutTooManyFiles(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	r := d.filesRun(prog(`for i in range(10050):
    open("out/f%05d" % i, "w").close()
class Big:
    def __repr__(self):
        return "x" * (9 << 20)
display(Big())
return 1`))
	expectOK(t, r.runResult, `1`)
	if len(r.Files) != 10000 || len(r.Outputs) != 1 ||
		r.Outputs[0].Data["text/plain"] != "[coderun] outputs truncated at 8388608 bytes" {
		t.Fatalf("%d files, outputs %+v", len(r.Files), r.Outputs)
	}
}

// C408: hostile displays: an object whose whole bundle cannot fit is never
// encoded (1 GB from _repr_png_), and a raw output frame past the budget
// written on fd 3 is dropped by the daemon; both end in the marker.
func TestHostileOutputs(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_ADDRESS_SPACE_MB": "2048", "CODERUN_MAX_OUTPUT_BYTES": "1048576"})
	r := d.filesRun(prog(`class Huge:
    def _repr_png_(self):
        return bytes(1 << 30)
display(Huge())
display("after")
return 1`))
	expectOK(t, r.runResult, `1`)
	if len(r.Outputs) != 1 || r.Outputs[0].Data["text/plain"] != "[coderun] outputs truncated at 1048576 bytes" {
		t.Fatalf("outputs %+v", r.Outputs)
	}
	r = d.filesRun(prog(`import os
line = b'{"type":"output","data":{"text/plain":"' + b"x" * (8 << 20) + b'"}}\n'
os.write(3, line) if len(line) < 65536 else [os.write(3, line[i:i + 65536]) for i in range(0, len(line), 65536)]
os.write(3, b'{"type":"output","data":{"image/png":"not base64!"}}\n')
return 2`))
	expectOK(t, r.runResult, `2`)
	if len(r.Outputs) != 1 || !strings.HasPrefix(r.Outputs[0].Data["text/plain"], "[coderun] outputs truncated") {
		t.Fatalf("outputs %+v", r.Outputs)
	}
}

// C409: bad run.files through the binary: −32602 naming files[i], nothing spawned.
func TestFilesRefused(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_MAX_FILE_BYTES": "1000"})
	tiny := `{"path":"f","text":""},`
	cases := []struct{ files, msg string }{
		{`[{"path":"../x","text":""}]`, `files[0].path "../x" must not contain a '..' segment`},
		{`[{"path":"/tmp/x","text":""}]`, `files[0].path "/tmp/x" must be relative to the working directory, not absolute`},
		{`[{"path":"a\u0000","text":""}]`, `files[0].path "a\u0000" must not contain NUL`},
		{`[{"path":"` + strings.Repeat("d/", 10000) + `f","text":""}]`, `is longer than 4095 bytes`},
		{"[" + strings.Repeat(tiny, 100000) + `{"path":"g","text":""}]`, "files has 100001 entries; at most 10000 are allowed"},
		{`[{"path":"x","base64":"%%%"}]`, "files[0].base64 is not valid base64"},
		{`[{"path":"x","text":"` + strings.Repeat("a", 1001) + `"}]`, "files: the decoded size exceeds maxFileBytes 1000"},
	}
	for _, c := range cases {
		m := d.call("run", `{"program":"","files":`+c.files+`}`)
		if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, c.msg) {
			t.Errorf("%.60s: got %+v, want −32602 %q", c.files, m.Error, c.msg)
		}
	}
}

// venvPython is the project's test interpreter when it has the display
// libraries (make .venv/.installed installs them), else the test is skipped.
func venvPython(t *testing.T, modules ...string) string {
	t.Helper()
	py, err := filepath.Abs("../.venv/bin/python")
	if err == nil {
		_, err = os.Stat(py)
	}
	if err == nil {
		err = exec.Command(py, "-I", "-c", "import "+strings.Join(modules, ", ")).Run()
	}
	if err != nil {
		t.Skipf("%s not installed in ../.venv (make .venv/.installed): %v", strings.Join(modules, ", "), err)
	}
	return py
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// C410: with matplotlib, plt.show() displays every open figure as PNG and
// closes it, a Figure passed to display renders as PNG, no display server.
func TestMatplotlib(t *testing.T) {
	t.Parallel()
	py := venvPython(t, "matplotlib")
	d := started(t, map[string]string{"CODERUN_PYTHON_BIN": py, "CODERUN_ADDRESS_SPACE_MB": "2048"})
	r := d.filesRun(prog(`import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.figure()
plt.bar(["a"], [1])
plt.show()
fig, ax = plt.subplots()
ax.plot([0, 1])
display(fig)
return len(plt.get_fignums())`))
	expectOK(t, r.runResult, `1`)
	if len(r.Outputs) != 3 {
		t.Fatalf("outputs %+v logs %q", len(r.Outputs), r.Logs)
	}
	for i, o := range r.Outputs {
		png, err := base64.StdEncoding.DecodeString(o.Data["image/png"])
		if err != nil || !bytes.HasPrefix(png, pngMagic) || !strings.HasPrefix(o.Data["text/plain"], "<Figure") {
			t.Errorf("outputs[%d]: %d bytes of PNG, text %q", i, len(png), o.Data["text/plain"])
		}
	}
}

// C411: a pandas DataFrame renders through its own reprs as HTML and text.
func TestPandas(t *testing.T) {
	t.Parallel()
	py := venvPython(t, "pandas")
	d := started(t, map[string]string{"CODERUN_PYTHON_BIN": py, "CODERUN_ADDRESS_SPACE_MB": "2048"})
	r := d.filesRun(prog(`import pandas as pd
df = pd.read_csv("in.csv")
display(df)
return int(df["y"].sum())`, `"files":[{"path":"in.csv","text":"x,y\n1,2\n3,4\n"}]`))
	expectOK(t, r.runResult, `6`)
	if len(r.Outputs) != 1 || !strings.Contains(r.Outputs[0].Data["text/html"], "<table") ||
		!strings.Contains(r.Outputs[0].Data["text/plain"], "x  y") {
		t.Fatalf("outputs %+v", r.Outputs)
	}
}
