package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// modelTextCase is one case of clients/testdata/model-text.json, the
// contract every client's formatter shares with render.
type modelTextCase struct {
	Name    string          `json:"name"`
	Result  json.RawMessage `json:"result"`
	Text    string          `json:"text"`
	IsError bool            `json:"isError"`
	Images  []struct {
		MIME   string `json:"mime"`
		Base64 string `json:"base64"`
	} `json:"images"`
}

// wireResult reads a run result object as the daemon sends it into the
// protocol.Result the daemon built it from. The file is indented for
// reading; the daemon's value is canonical compact JSON, so the value is
// compacted.
func wireResult(t *testing.T, raw json.RawMessage) protocol.Result {
	t.Helper()
	var w struct {
		Value   json.RawMessage `json:"value"`
		Logs    []string        `json:"logs"`
		Outputs []struct {
			Data json.RawMessage `json:"data"`
		} `json:"outputs"`
		Error *struct {
			Kind    string  `json:"kind"`
			Message string  `json:"message"`
			Line    *int64  `json:"line"`
			Path    *string `json:"path"`
			Hint    *string `json:"hint"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatal(err)
	}
	r := protocol.Result{Logs: w.Logs}
	if w.Value != nil {
		var b bytes.Buffer
		if err := json.Compact(&b, w.Value); err != nil {
			t.Fatal(err)
		}
		r.Value = b.Bytes()
	}
	for _, o := range w.Outputs {
		r.Outputs = append(r.Outputs, protocol.Output{Data: o.Data})
	}
	if e := w.Error; e != nil {
		r.Error = &protocol.RunError{Kind: e.Kind, Message: e.Message, Line: e.Line, Path: e.Path, Hint: e.Hint}
	}
	return r
}

// render gives, for every golden case, exactly the model's text, the error
// flag and the images the clients' formatters give.
func TestRenderMatchesModelTextGolden(t *testing.T) {
	leakcheck.Check(t)
	raw, err := os.ReadFile("../clients/testdata/model-text.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []modelTextCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) == 0 {
		t.Fatal("no cases in model-text.json")
	}
	for _, c := range doc.Cases {
		t.Run(c.Name, func(t *testing.T) {
			got := render(wireResult(t, c.Result), "")
			text := got.Content[0].(*sdk.TextContent).Text
			if text != c.Text {
				t.Errorf("text:\n got %q\nwant %q", text, c.Text)
			}
			if got.IsError != c.IsError {
				t.Errorf("isError %v, want %v", got.IsError, c.IsError)
			}
			imgs := got.Content[1:]
			if len(imgs) != len(c.Images) {
				t.Fatalf("%d images, want %d", len(imgs), len(c.Images))
			}
			for i, want := range c.Images {
				img := imgs[i].(*sdk.ImageContent)
				if img.MIMEType != want.MIME || base64.StdEncoding.EncodeToString(img.Data) != want.Base64 {
					t.Errorf("image %d: %s %q, want %s %q", i, img.MIMEType,
						base64.StdEncoding.EncodeToString(img.Data), want.MIME, want.Base64)
				}
			}
		})
	}
}
