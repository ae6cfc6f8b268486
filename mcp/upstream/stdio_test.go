package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeMessage agrees with the SDK's jsonrpc.DecodeMessage on every line it
// accepts, and refuses what the SDK refuses; also a batch, and trailing data
// (which the SDK's stdio transport refuses before decoding).
func TestDecodeMessageAgreesWithSDK(t *testing.T) {
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}]}}`,
		`{"jsonrpc":"2.0","id":"a\u00e9","result":{}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"bad","data":{"k":[1]}}}`,
		`{"jsonrpc":"2.0","id":3,"result":null}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","method":"ping","id":12,"params":{"a":1}}`,
		`{"jsonrpc":"2.0","method":"x","id":null,"params":null}`,
		`{"id":1,"jsonrpc":"2.0","result":1,"result":2}`,
		`{"jsonrpc":"1.0","id":1,"result":{}}`,
		`{"id":1,"result":{}}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":true,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":5}`,
		`{"jsonrpc":"2.0","id":1,"result":{}`,
		`{"jsonrpc":"2.0","id":1,"result":{}} x`,
		`[{"jsonrpc":"2.0","id":1,"result":{}}]`,
		`"2.0"`,
	}
	for _, line := range lines {
		want, wantErr := jsonrpc.DecodeMessage([]byte(line))
		got, gotErr := decodeMessage([]byte(line))
		if refused := strings.HasPrefix(line, "[") || strings.HasSuffix(line, " x"); refused {
			if gotErr == nil {
				t.Errorf("%s: accepted", line)
			}
			continue
		}
		if (wantErr != nil) != (gotErr != nil) {
			t.Errorf("%s: error %v, the SDK's %v", line, gotErr, wantErr)
			continue
		}
		if wantErr == nil && gotErr == nil && !reflect.DeepEqual(normal(got), normal(want)) {
			t.Errorf("%s: got %#v, the SDK's %#v", line, got, want)
		}
	}
}

// normal makes two decodings comparable: raw texts as strings.
func normal(m jsonrpc.Message) any {
	switch m := m.(type) {
	case *jsonrpc.Request:
		return []any{"request", m.ID, m.Method, string(m.Params)}
	case *jsonrpc.Response:
		var e any
		if m.Error != nil {
			w := m.Error.(*jsonrpc.Error)
			e = []any{w.Code, w.Message, string(w.Data)}
		}
		return []any{"response", m.ID, string(m.Result), e}
	}
	return m
}

// Lines longer than the read buffer, blank lines and a last line without a
// newline are read whole; a line over maxLine breaks the connection.
func TestLineConnReadsLines(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":2,"result":{"t":"` + strings.Repeat("y", 3*readChunk) + `"}}`
	in := "\n" + `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n \r\n" + long + "\n" + `{"jsonrpc":"2.0","id":3,"result":{}}`
	c := &lineConn{r: newReader(strings.NewReader(in)), maxLine: 4 * readChunk}
	for _, want := range []int64{1, 2, 3} {
		m, err := c.Read(context.Background())
		if err != nil {
			t.Fatalf("message %d: %v", want, err)
		}
		if id := m.(*jsonrpc.Response).ID.Raw(); id != want {
			t.Fatalf("id %v, want %d", id, want)
		}
	}
	if _, err := c.Read(context.Background()); err != io.EOF {
		t.Fatalf("after the last message: %v, want EOF", err)
	}
	huge := &lineConn{r: newReader(io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":"`),
		strings.NewReader(strings.Repeat("z", 5*readChunk)))), maxLine: 4 * readChunk}
	var over *longLine
	if _, err := huge.Read(context.Background()); !errors.As(err, &over) || over.call != "" {
		t.Fatalf("a line over %d bytes: %v, want the connection broken", huge.maxLine, err)
	}
}

// A direct call's response larger than its budget can take is read past,
// never held whole (the reader keeps at most the budget's room and one
// chunk), and refuses that call alone: the next message is read.
func TestLineConnRefusesAnOverBudgetResult(t *testing.T) {
	over := `{"jsonrpc":"2.0","id":"coderun-1","result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 64*readChunk) + `"}]}}`
	in := over + "\n" + `{"jsonrpc":"2.0","id":7,"result":{}}` + "\n"
	c := &lineConn{r: newReader(strings.NewReader(in)), maxLine: 1 << 30, calls: map[string]waiting{}}
	got := make(chan error, 1)
	c.calls["coderun-1"] = waiting{b: NewBudget(1000), done: func(_ json.RawMessage, err error) { got <- err }}
	m, err := c.Read(context.Background())
	if err != nil || m.(*jsonrpc.Response).ID.Raw() != int64(7) {
		t.Fatalf("after the refused line: %v %v, want the next message", m, err)
	}
	var large *TooLarge
	if err := <-got; !errors.As(err, &large) || large.Limit != 1000 {
		t.Fatalf("the call got %v, want a *TooLarge of its budget", err)
	}
}

// The answer to the SDK's tools/list is held only up to maxPage: past it the
// SDK receives an error response in its place and the connection reads on; a
// long line whose head shows no id is bounded the same way and breaks it.
func TestLineConnBoundsPages(t *testing.T) {
	filler := strings.Repeat("x", 4*readChunk)
	in := `{"jsonrpc":"2.0","id":5,"result":{"tools":[{"name":"` + filler + `"}]}}` + "\n" +
		`{"jsonrpc":"2.0","result":{"tools":[{"name":"` + filler + `"}]},"id":6}` + "\n"
	listID, _ := jsonrpc.MakeID(float64(5))
	c := &lineConn{r: newReader(strings.NewReader(in)), maxLine: 1 << 30, maxPage: 2 * readChunk,
		calls: map[string]waiting{}, listID: listID}
	m, err := c.Read(context.Background())
	r, ok := m.(*jsonrpc.Response)
	var wire *jsonrpc.Error
	if err != nil || !ok || r.ID != listID || !errors.As(r.Error, &wire) || wire.Code != codePageTooLong {
		t.Fatalf("the long page: %#v %v, want an error response to the listing", m, err)
	}
	var over *longLine
	if _, err := c.Read(context.Background()); !errors.As(err, &over) || over.bound != 2*readChunk {
		t.Fatalf("a long line without a leading id: %v, want the connection broken at the page bound", err)
	}
}
