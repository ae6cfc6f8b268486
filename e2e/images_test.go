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
// (through the display protocol and as a raw frame on fd 3), a WAV claiming
// WebP, and one real PNG signature.
const mislabeledProgram = `import os
class Liar:
    def _repr_png_(self):
        return b"GIF89a\x01\x00\x01\x00"
    def __repr__(self):
        return "Liar()"
display(Liar())
os.write(3, b'{"type":"output","data":{"image/jpeg":"' + __import__("base64").b64encode(b"<svg onload='x'/>") + b'","text/plain":"raw"}}\n')
os.write(3, b'{"type":"output","data":{"image/webp":"' + __import__("base64").b64encode(b"RIFF\x00\x00\x00\x00WAVEfmt ") + b'"}}\n')
class Honest:
    def _repr_png_(self):
        return b"\x89PNG\r\n\x1a\n"
display(Honest())
return 1`

// C1160: an image whose bytes are not of its declared type (a GIF as
// image/png, SVG as image/jpeg, a WAV as image/webp) is dropped from its
// output with a log note naming the type; the output's other types stay, an
// output left empty is dropped; a real PNG passes.
func TestDisplayMislabeledImage(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	r := d.filesRun(prog(mislabeledProgram))
	expectOK(t, r.runResult, `1`)
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n"))
	want := []map[string]string{{"text/plain": "Liar()"}, {"text/plain": "raw"}, {"image/png": png, "text/plain": "<Honest object>"}}
	if len(r.Outputs) != len(want) {
		t.Fatalf("outputs %+v, want %d", r.Outputs, len(want))
	}
	for i, o := range r.Outputs {
		if _, ok := o.Data["text/plain"]; !ok || o.Data["image/png"] != want[i]["image/png"] || len(o.Data) != len(want[i]) {
			t.Errorf("output %d: %v, want the types of %v", i, o.Data, want[i])
		}
	}
	logs := strings.Join(r.Logs, "")
	for _, note := range []string{
		"[coderun] display: dropped image/png: its bytes are not PNG (they start 4749463839610100)",
		"[coderun] display: dropped image/jpeg: its bytes are not JPEG (they start 3c737667206f6e6c)",
		"[coderun] display: dropped image/webp: its bytes are not WebP (they start 5249464600000000)",
	} {
		if !strings.Contains(logs, note) {
			t.Errorf("logs %q lack %q", r.Logs, note)
		}
	}
}

// C1161: coderun-rpc mcp gives no image content for a mislabeled image; the
// note is in the text the model reads.
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
		t.Errorf("isError %v, image contents %v, want the one real PNG", res.IsError, mimes)
	}
	if !strings.Contains(text(res), "dropped image/png: its bytes are not PNG") {
		t.Errorf("text %q lacks the note", text(res))
	}
}
