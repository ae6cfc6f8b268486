package coderun

import (
	"bufio"
	"strings"
	"testing"
)

// C908: the client reads no body over its bound: a Content-Length past
// 256 MiB ends the connection at its header (the library's codec would read
// up to 4 GiB), and a frame within the bound, its header arriving in
// pieces, decodes as before.
func TestC908MessageBound(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("Content-Length: 268435457\r\n\r\n{"))
	if _, err := readFrame(r); err == nil || !strings.Contains(err.Error(), "exceeds the client's 268435456-byte bound") {
		t.Fatalf("err %v", err)
	}
	body := `{"jsonrpc":"2.0","id":1,"result":[1,2]}`
	r = bufio.NewReaderSize(&slowReader{s: "Content-Type: x\r\nContent-Length: 39\r\n\r\n" + body}, 16)
	if v, err := readFrame(r); err != nil || string(v) != body {
		t.Fatalf("%s %v", v, err)
	}
}

// slowReader returns one byte a read, as a pipe may.
type slowReader struct{ s string }

func (r *slowReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, nil
	}
	p[0], r.s = r.s[0], r.s[1:]
	return 1, nil
}
