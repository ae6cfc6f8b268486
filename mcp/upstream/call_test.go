package upstream

import (
	"testing"

	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// FuzzReadResult: any bytes a server sends as a tools/call result are either
// refused or give a program value that is one JSON value, and an error text.
func FuzzReadResult(f *testing.F) {
	for _, seed := range []string{
		`{"content":[{"type":"text","text":"hi"}]}`,
		`{"content":[],"structuredContent":{"sum":3}}`,
		`{"content":[{"type":"image","data":"iVBORw==","mimeType":"image/png"},{"type":"text","text":"a"}]}`,
		`{"isError":true,"content":[{"type":"text","text":"bad \"thing\""}]}`,
		`{"inputRequests":{"roots":{"method":"roots/list"}}}`,
		`{"content":null,"structuredContent":null,"isError":null}`,
		`{"content":[1]}`, `{"isError":"yes"}`, `[]`, `{"content":{}}`, `{"text":"\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		res, err := readResult(raw)
		if err != nil {
			return
		}
		if v := res.value(); !wireguard.Valid(v, wireguard.Strict) {
			t.Fatalf("value %q of %q is not one JSON value", v, raw)
		}
		if res.isError && res.errorText() == "" {
			t.Fatalf("an empty error text for %q", raw)
		}
	})
}
