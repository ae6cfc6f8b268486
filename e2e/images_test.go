package e2e

import (
	"encoding/base64"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Displayed images are checked against their declared type where the daemon
// bills them (docs/protocol-files.md §12.3): bytes that are not of the type
// are dropped from the output, with a note in the run's logs.

// mislabeledProgram displays a GIF claiming PNG, SVG text claiming JPEG
// (a raw frame on fd 3), a WAV claiming WebP, a PNG header declaring 10^10
// pixels, a JPEG frame header declaring 65535×65535, an SVG with a script,
// one real PNG signature, and a GIF whose 1×1 screen holds a 30000×30000
// frame (a raw frame on fd 3).
const mislabeledProgram = `import os
class Liar:
    def _repr_png_(self):
        return b"GIF89a\x01\x00\x01\x00"
    def __repr__(self):
        return "Liar()"
display(Liar())
os.write(3, b'{"type":"output","data":{"image/jpeg":"' + __import__("base64").b64encode(b"<svg onload='x'/>") + b'","text/plain":"raw"}}\n')
os.write(3, b'{"type":"output","data":{"image/webp":"' + __import__("base64").b64encode(b"RIFF\x00\x00\x00\x00WAVEfmt ") + b'"}}\n')
class Bomb:
    def _repr_png_(self):
        return b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + (100000).to_bytes(4, "big") * 2 + bytes(64)
display(Bomb())
class JpegBomb:
    def _repr_jpeg_(self):
        return b"\xff\xd8\xff\xe1\x00\x04ab\xff\xc0\x00\x0b\x08\xff\xff\xff\xff\x01\x01\x11\x00\xff\xd9"
display(JpegBomb())
class Scripted:
    def _repr_svg_(self):
        return "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>"
display(Scripted())
class Honest:
    def _repr_png_(self):
        return b"\x89PNG\r\n\x1a\n"
display(Honest())
gif = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff,\x00\x00\x00\x00\x30\x75\x30\x75\x00\x02\x02\x4c\x01\x00;"
os.write(3, b'{"type":"output","data":{"image/gif":"' + __import__("base64").b64encode(gif) + b'","text/plain":"gif"}}\n')
return 1`

// C1160: an image whose bytes are not of its declared type (a GIF as
// image/png, SVG as image/jpeg, a WAV as image/webp) or whose header declares
// a decompression bomb (a PNG of 100000×100000 pixels in a hundred bytes, a
// JPEG of 65535×65535 in thirty, a GIF whose first frame is 30000×30000) is
// dropped from its output with a log note naming the type and the reason; the
// output's other types stay, an output left empty is dropped; an SVG with a
// script stays text; a real PNG passes.
func TestDisplayMislabeledImage(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	r := d.filesRun(prog(mislabeledProgram))
	expectOK(t, r.runResult, `1`)
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n"))
	want := [][]string{{"text/plain"}, {"text/plain"}, {"text/plain"}, {"text/plain"}, {"image/svg+xml", "text/plain"}, {"image/png", "text/plain"}, {"text/plain"}}
	if len(r.Outputs) != len(want) {
		t.Fatalf("outputs %+v, want %d", r.Outputs, len(want))
	}
	for i, o := range r.Outputs {
		if len(o.Data) != len(want[i]) || o.Data[want[i][0]] == "" {
			t.Errorf("output %d: %v, want the types %v", i, o.Data, want[i])
		}
	}
	if got := r.Outputs[5].Data["image/png"]; got != png {
		t.Errorf("the real PNG came back as %q", got)
	}
	logs := strings.Join(r.Logs, "")
	for _, note := range []string{
		"[coderun] display: dropped image/png: its bytes are not PNG (they start 4749463839610100)",
		"[coderun] display: dropped image/jpeg: its bytes are not JPEG (they start 3c737667206f6e6c)",
		"[coderun] display: dropped image/webp: its bytes are not WebP (they start 5249464600000000)",
		"[coderun] display: dropped image/png: its header declares 100000×100000 pixels (at most 67108864 in all)",
		"[coderun] display: dropped image/jpeg: its header declares 65535×65535 pixels",
		"[coderun] display: dropped image/gif: its header declares 30000×30000 pixels",
	} {
		if !strings.Contains(logs, note) {
			t.Errorf("logs %q lack %q", r.Logs, note)
		}
	}
}

// C1161: coderun-rpc mcp gives no image content for a refused image nor for
// SVG (text, in structuredContent only); the notes are in the text the model
// reads.
func TestMCPMislabeledImage(t *testing.T) {
	t.Parallel()
	cs := mcpServe(t, nil)
	res := runPython(t, cs, map[string]any{"program": mislabeledProgram}, nil)
	var mimes []string
	for _, c := range res.Content {
		if ic, ok := c.(*sdk.ImageContent); ok {
			mimes = append(mimes, ic.MIMEType)
		}
	}
	if res.IsError || len(mimes) != 1 || mimes[0] != "image/png" {
		t.Errorf("isError %v, image contents %v, want the one real PNG (no SVG)", res.IsError, mimes)
	}
	if !strings.Contains(text(res), "dropped image/png: its bytes are not PNG") || !strings.Contains(text(res), "dropped image/png: its header declares") {
		t.Errorf("text %q lacks the note", text(res))
	}
}

// C1166: a program that displays more refused images than a run keeps outputs costs
// the daemon no memory past its budgets: each is dropped unbilled, the notes
// stop at the log budget's marker, and the run ends normally.
func TestManyRefusedImages(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_MAX_LOG_BYTES": "4096"})
	r := d.filesRun(prog(`import os, base64
frame = b'{"type":"output","data":{"image/gif":"' + base64.b64encode(b"<svg/>" * 100) + b'"}}\n'
for _ in range(12000):  # more than the 10 000 outputs a run keeps
    os.write(3, frame)
display("after")
return 1`))
	expectOK(t, r.runResult, `1`)
	if len(r.Outputs) != 1 || r.Outputs[0].Data["text/plain"] != "'after'" {
		t.Errorf("outputs %+v, want only 'after'", r.Outputs)
	}
	last := r.Logs[len(r.Logs)-1]
	if !strings.HasPrefix(last, "[coderun] log capture truncated") || !strings.Contains(r.Logs[0], "dropped image/gif") {
		t.Errorf("logs start %q and end %q, want the notes then the log marker", r.Logs[0], last)
	}
}
