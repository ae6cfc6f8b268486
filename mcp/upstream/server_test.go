package upstream

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

type bodyOf string

func (b bodyOf) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(string(b)))}, nil
}

// The body of a response to a POST (a request's answer) is read up to the
// bound and no further; other responses (the server's event stream) are not
// bounded by it.
func TestHTTPResponseBodyBounded(t *testing.T) {
	h := headerTransport{maxBody: 1000, next: bodyOf(strings.Repeat("x", 4000))}
	for method, refused := range map[string]bool{http.MethodPost: true, http.MethodGet: false} {
		req, _ := http.NewRequest(method, "http://127.0.0.1/mcp", nil)
		resp, err := h.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if got := err != nil; got != refused || refused && len(b) > 1000+32<<10 {
			t.Errorf("%s: read %d bytes, error %v; want refused %v", method, len(b), err, refused)
		}
	}
}
