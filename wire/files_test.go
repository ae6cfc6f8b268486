package wire

import (
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

var filesLimits = protocol.Limits{CPUSeconds: 60, MaxWallMs: 600000, AddressSpaceMb: 512, MaxLogBytes: 65536,
	MaxValueBytes: 32768, MaxFileBytes: 16, MaxOutputBytes: 1 << 20}

func run(files string) string { return `{"program":"","files":` + files + `}` }

// C402: every bad run.files entry is −32602 naming files[i].
var fileCases = []struct{ params, msg string }{
	{run(`{}`), "files must be an array of {path, text | base64}"},
	{run(`[1]`), "files[0] must be an object {path, text | base64}"},
	{run(`[{"text":"x"}]`), "files[0].path must be a string"},
	{run(`[{"path":"../x","text":""}]`), `files[0].path "../x" must not contain a '..' segment`},
	{run(`[{"path":"a/../../x","text":""}]`), `files[0].path "a/../../x" must not contain a '..' segment`},
	{run(`[{"path":"/etc/passwd","text":""}]`), `files[0].path "/etc/passwd" must be relative to the working directory, not absolute`},
	{run(`[{"path":"a\u0000b","text":""}]`), `files[0].path "a\u0000b" must not contain NUL`},
	{run(`[{"path":"","text":""}]`), `files[0].path "" must name a file`},
	{run(`[{"path":".","text":""}]`), `files[0].path "." must name a file`},
	{run(`[{"path":"a/","text":""}]`), `files[0].path "a/" must name a file`},
	{run(`[{"path":"out/x","text":""}]`), `files[0].path "out/x" must not be under out/ (the run's output folder)`},
	{run(`[{"path":"./out","text":""}]`), `files[0].path "./out" must not be under out/ (the run's output folder)`},
	{run(`[{"path":"` + strings.Repeat("a/", 10000) + `x","text":""}]`), `is longer than 4095 bytes`},
	{run(`[{"path":"` + strings.Repeat("n", 256) + `","text":""}]`), `has a segment longer than 255 bytes`},
	{run(`[{"path":"a"}]`), "files[0] must have exactly one of text and base64"},
	{run(`[{"path":"a","text":"x","base64":""}]`), "files[0] must have exactly one of text and base64"},
	{run(`[{"path":"a","text":1}]`), "files[0].text must be a string"},
	{run(`[{"path":"a","base64":1}]`), "files[0].base64 must be a string"},
	{run(`[{"path":"a","base64":"!!!!"}]`), "files[0].base64 is not valid base64 (illegal base64 data at input byte 0)"},
	{run(`[{"path":"a","base64":"YQ"}]`), "files[0].base64 is not valid base64"},
	{run(`[{"path":"a","text":""},{"path":"./a","text":""}]`), `files[1].path "./a" repeats files[0].path`},
	{run(`[{"path":"a","text":""},{"path":"a/b","text":""}]`), `files[1].path "a/b" needs files[0].path as a folder`},
	{run(`[{"path":"a/b","text":""},{"path":"a","text":""}]`), `files[1].path "a" is a folder of files[0].path`},
	{run(`[{"path":"a","text":"0123456789"},{"path":"b","base64":"MDEyMzQ1Njc="}]`),
		"files: the decoded size exceeds maxFileBytes 16 (at files[1], 18 bytes so far)"},
	{`{"program":"","limits":{"maxFileBytes":2},"files":[{"path":"a","text":"é1"}]}`,
		"files: the decoded size exceeds maxFileBytes 2 (at files[0], 3 bytes so far)"},
	{`{"program":"","limits":{"maxOutputBytes":2097152}}`, "limits.maxOutputBytes must not exceed the daemon's configured 1048576, got 2097152"},
	{`{"program":"","limits":{"maxFileBytes":0}}`, "limits.maxFileBytes must be a positive integer, got 0"},
}

func TestValidateFiles(t *testing.T) {
	for _, c := range fileCases {
		_, err := ValidateRun([]byte(c.params), filesLimits, noPackages)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%.80s: got %v, want %q", c.params, err, c.msg)
		}
	}
	many := "[" + strings.Repeat(`{"path":"a","text":""},`, 10000) + `{"path":"b","text":""}]`
	if _, err := ValidateRun([]byte(run(many)), filesLimits, noPackages); err == nil ||
		err.Error() != "files has 10001 entries; at most 10000 are allowed" {
		t.Errorf("10001 files: %v", err)
	}
}

func TestValidateFilesAccepted(t *testing.T) {
	p, err := ValidateRun([]byte(run(`[{"path":"./data//in.csv","text":"a,b\n"},{"path":"bin/x","base64":"AAE="},{"path":"e","text":""}]`)), filesLimits, noPackages)
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.InputFile{{Path: "data/in.csv", Data: []byte("a,b\n")}, {Path: "bin/x", Data: []byte{0, 1}},
		{Path: "e", Data: []byte{}}}
	if len(p.Files) != len(want) {
		t.Fatalf("%+v", p.Files)
	}
	for i, f := range p.Files {
		if f.Path != want[i].Path || string(f.Data) != string(want[i].Data) {
			t.Errorf("files[%d] = %q %q, want %q %q", i, f.Path, f.Data, want[i].Path, want[i].Data)
		}
	}
	for _, none := range []string{`{"program":""}`, run(`null`), run(`[]`)} {
		if p, err := ValidateRun([]byte(none), filesLimits, noPackages); err != nil || len(p.Files) != 0 {
			t.Errorf("%s: %v %v", none, p.Files, err)
		}
	}
}
