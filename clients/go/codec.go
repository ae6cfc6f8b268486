package coderun

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/sourcegraph/jsonrpc2"
)

// maxMessageBytes bounds a message the client reads. The daemon's own cap
// is on what it reads; what it writes is larger: a run result with a full
// log ledger, escaped, is tens of MiB.
const maxMessageBytes = 256 << 20

// maxHeaderBytes bounds one header block (the daemon writes one short
// Content-Length line; LSP allows a Content-Type line too).
const maxHeaderBytes = 4096

// errMalformed marks a frame the peer should never have written; the
// connection ends there.
var errMalformed = errors.New("coderun: malformed frame from the daemon")

// NewObjectStream is the jsonrpc2.ObjectStream the client speaks over a byte
// stream (the daemon's stdio, a unix or TCP connection of `serve`): LSP
// framing (a Content-Length header block, then the body). It is exported for
// tools that drive the daemon one message at a time through
// jsonrpc2.NewConn, such as tests and benchmarks. Closing it closes rwc.
//
// It reads with bounds, because the peer may be hostile: a header block
// longer than 4 KiB, a header line without CRLF, a frame without
// Content-Length or with one over 256 MiB ends the stream with an error
// before the body is read. ReadObject into a *json.RawMessage yields the body
// exactly as read, not validated (the caller decodes it); any other target
// is decoded with encoding/json. WriteObject writes a json.RawMessage as it
// is, trusting the caller that it is one JSON value, and marshals anything
// else with encoding/json; each frame is one write, flushed.
//
// The library's VSCodeObjectCodec is not used for reading because it reads a
// header line without bound, accepts a 4 GiB body, and leaves a body's bytes
// after its first JSON value in the stream, where they are read as the next
// header; nor for writing a json.RawMessage, which it compacts first (a copy
// and a scan per binding answer, the client's hot path).
func NewObjectStream(rwc io.ReadWriteCloser) jsonrpc2.ObjectStream {
	return &frameStream{r: bufio.NewReaderSize(rwc, 64<<10), w: bufio.NewWriterSize(rwc, 64<<10), c: rwc}
}

// frameStream is NewObjectStream's stream.
type frameStream struct {
	r   *bufio.Reader // the read goroutine's only
	wmu sync.Mutex
	w   *bufio.Writer
	c   io.Closer
}

func (s *frameStream) ReadObject(v any) error {
	body, err := readFrame(s.r)
	if err != nil {
		return err
	}
	if raw, ok := v.(*json.RawMessage); ok {
		*raw = body
		return nil
	}
	return json.Unmarshal(body, v)
}

func (s *frameStream) WriteObject(obj any) error {
	body, ok := obj.(json.RawMessage)
	if !ok {
		var err error
		if body, err = json.Marshal(obj); err != nil {
			return err
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var head [32]byte
	h := strconv.AppendInt(append(head[:0], "Content-Length: "...), int64(len(body)), 10)
	if _, err := s.w.Write(append(h, "\r\n\r\n"...)); err != nil {
		return err
	}
	if _, err := s.w.Write(body); err != nil {
		return err
	}
	return s.w.Flush()
}

func (s *frameStream) Close() error { return s.c.Close() }

// readFrame reads one header block and exactly Content-Length bytes of body.
// The end of the stream before a frame's first byte is io.EOF; inside a frame
// it is io.ErrUnexpectedEOF.
func readFrame(r *bufio.Reader) ([]byte, error) {
	n, err := readHeader(r)
	if err != nil {
		return nil, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, unexpectedEOF(err)
	}
	return body, nil
}

// readHeader reads header lines, each ending in CRLF, up to the empty line
// and returns the Content-Length. Header names are case-insensitive (LSP);
// other headers are skipped.
func readHeader(r *bufio.Reader) (int, error) {
	length, read := -1, 0
	for {
		line, err := readLine(r, maxHeaderBytes-read)
		if err != nil {
			if err == io.EOF && read == 0 {
				return 0, io.EOF
			}
			return 0, unexpectedEOF(err)
		}
		read += len(line) + 2
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, fmt.Errorf("%w: header line %q", errMalformed, line)
		}
		if bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Length")) {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(value)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: Content-Length %q", errMalformed, value)
			}
			if n > maxMessageBytes {
				return 0, fmt.Errorf("coderun: a message of %d bytes exceeds the client's %d-byte bound", n, maxMessageBytes)
			}
			length = int(n)
		}
	}
	if length < 0 {
		return 0, fmt.Errorf("%w: no Content-Length header", errMalformed)
	}
	return length, nil
}

// readLine reads one line ending in CRLF, without it, reading at most limit
// bytes: a longer line is malformed, whatever follows.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > limit {
			return nil, fmt.Errorf("%w: header block longer than %d bytes", errMalformed, maxHeaderBytes)
		}
		switch {
		case err == nil:
			if !bytes.HasSuffix(line, []byte("\r\n")) {
				return nil, fmt.Errorf(`%w: a header line ends without \r\n`, errMalformed)
			}
			return line[:len(line)-2], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// unexpectedEOF maps an end of stream inside a frame to io.ErrUnexpectedEOF.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
