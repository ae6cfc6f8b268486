package rpc

import (
	"bufio"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Inbound framing (docs/protocol.md §2): the header block and exactly Content-Length
// body bytes are read here, with the caps and answers of the spec, so a bad
// body never desynchronises the stream. jsonrpc2's VSCodeObjectCodec is not
// used for reading (Appendix B item 5).

// headerFault is a header block that cannot be resynchronised.
type headerFault struct{ msg string }

func (e *headerFault) Error() string { return e.msg }

// oversize is a body above the inbound cap. It is answered before it is
// discarded (by the next call to next), so a client that sent an impossible
// length hears why the daemon reads on, instead of a silence until EOF.
type oversize struct{ length string }

func (e *oversize) Error() string {
	return "message body of " + e.length + " bytes exceeds the 67108864-byte limit"
}

type frameReader struct {
	r    *bufio.Reader
	skip int64 // body bytes of an oversize message still to discard
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next body. Errors: io.EOF (end of stream anywhere inside
// a message), *headerFault, *oversize (serving continues), or a read error.
func (f *frameReader) next() ([]byte, error) {
	if n := f.skip; n > 0 {
		f.skip = 0
		if _, err := io.CopyN(io.Discard, f.r, n); err != nil {
			return nil, eof(err)
		}
	}
	n, digits, err := f.header()
	if err != nil {
		return nil, err
	}
	if n > protocol.InboundMessageCap {
		f.skip = n
		return nil, &oversize{strings.TrimLeft(digits, "0")}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(f.r, body); err != nil {
		return nil, eof(err)
	}
	return body, nil
}

func eof(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return io.EOF
	}
	return err
}

// header reads one header block and returns the Content-Length.
func (f *frameReader) header() (int64, string, error) {
	var line []byte
	total := 0
	length, digits, found := int64(0), "", false
	for {
		c, err := f.r.ReadByte()
		if err != nil {
			return 0, "", eof(err)
		}
		total++
		if total > protocol.HeaderBlockCap {
			return 0, "", &headerFault{"header block exceeds 4096 bytes"}
		}
		if c != '\n' {
			line = append(line, c)
			continue
		}
		if len(line) == 0 || line[len(line)-1] != '\r' {
			return 0, "", &headerFault{`header line does not end in \r\n`}
		}
		text := string(line[:len(line)-1])
		line = line[:0]
		if text == "" {
			if !found {
				return 0, "", &headerFault{"missing Content-Length header"}
			}
			return length, digits, nil
		}
		name, value, ok := strings.Cut(text, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			continue // Content-Type and unknown headers are ignored
		}
		value = strings.Trim(value, " \t")
		if !allDigits(value) {
			return 0, "", &headerFault{"Content-Length value " + strconv.Quote(value) + " is not a decimal number"}
		}
		length, digits, found = parseLength(value), value, true
	}
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseLength saturates: a length beyond int64 is answered as oversize, then
// discarded until EOF.
func parseLength(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 1<<63 - 1
	}
	return v
}
