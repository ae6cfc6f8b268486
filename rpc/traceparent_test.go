package rpc

import (
	"strings"
	"testing"
)

func TestBindingCallTraceparent(t *testing.T) {
	got := string(encodeBindingCall(7, `"r"`, "tools", "f", []byte(`{}`), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	want := `{"jsonrpc":"2.0","id":7,"method":"binding/call","params":{"runId":"r","namespace":"tools","function":"f","args":{},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`
	if got != want {
		t.Errorf("binding/call\n got %s\nwant %s", got, want)
	}
	if got := string(encodeBindingCall(7, `"r"`, "tools", "f", []byte(`{}`), "")); strings.Contains(got, "traceparent") {
		t.Errorf("no traceparent: %s", got)
	}
}
