package coderun

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"

	"github.com/sourcegraph/jsonrpc2"
)

// maxMessageBytes bounds a message the client reads. The daemon's own cap
// is on what it reads; what it writes is larger: a run result with a full
// log ledger, escaped, is tens of MiB.
const maxMessageBytes = 256 << 20

// cappedCodec is the library's LSP codec with a bound on the body it reads:
// VSCodeObjectCodec takes a Content-Length up to 4 GiB and reads it whole,
// so a peer could make the client hold that much. The header block is
// peeked first (up to maxHeaderBytes and the reader's buffer; a longer one
// is the library's to refuse) and a length over maxMessageBytes ends the
// connection. On WebSocket the same bound is the connection's read limit.
type cappedCodec struct{ jsonrpc2.VSCodeObjectCodec }

const maxHeaderBytes = 4096

func (c cappedCodec) ReadObject(r *bufio.Reader, v any) error {
	if n, ok := peekContentLength(r); ok && n > maxMessageBytes {
		return fmt.Errorf("coderun: a message of %d bytes exceeds the client's %d-byte bound", n, maxMessageBytes)
	}
	return c.VSCodeObjectCodec.ReadObject(r, v)
}

// peekContentLength reads ahead, without consuming, to the end of the next
// header block and returns its Content-Length, spelled as the library
// reads it.
func peekContentLength(r *bufio.Reader) (uint64, bool) {
	for n := 1; n <= min(maxHeaderBytes, r.Size()); n = max(n+1, r.Buffered()) {
		b, err := r.Peek(n)
		if err != nil {
			return 0, false
		}
		end := bytes.Index(b, []byte("\r\n\r\n"))
		if end < 0 {
			continue
		}
		for _, line := range bytes.Split(b[:end], []byte("\r\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
				n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
				return n, err == nil
			}
		}
		return 0, false
	}
	return 0, false
}
