package lspclient

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// maxHeaderBytes bounds one header block (the daemon writes one short
// Content-Length line; LSP allows a Content-Type line too).
const maxHeaderBytes = 4096

// Frame is body (as it is, valid or not) after its LSP header, ready for
// one write, so a frame is never interleaved with another writer's.
func Frame(body []byte) []byte {
	dst := make([]byte, 0, len(body)+32)
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, body...)
}

// readFrame reads one header block and exactly Content-Length bytes of body,
// refusing a body longer than maxBody before allocating it. It returns io.EOF
// only at a clean end between frames, io.ErrUnexpectedEOF for a stream cut
// inside a frame, and an error wrapping ErrMalformed for a broken header.
func readFrame(r *bufio.Reader, maxBody int) ([]byte, error) {
	n, err := readHeader(r)
	if err != nil {
		return nil, err
	}
	if n > maxBody {
		return nil, fmt.Errorf("%w: Content-Length %d exceeds the client's bound %d", ErrMalformed, n, maxBody)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, unexpected(err)
	}
	return body, nil
}

// readHeader reads header lines up to the empty line and returns the
// Content-Length. Header names are case-insensitive; other headers are
// skipped.
func readHeader(r *bufio.Reader) (int, error) {
	length, read := -1, 0
	for first := true; ; first = false {
		line, err := r.ReadSlice('\n')
		read += len(line)
		if err != nil {
			return 0, headerReadError(err, first && read == 0)
		}
		if read > maxHeaderBytes {
			return 0, fmt.Errorf("%w: header block longer than %d bytes", ErrMalformed, maxHeaderBytes)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, fmt.Errorf("%w: header line %q", ErrMalformed, line)
		}
		if bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil || length < 0 {
				return 0, fmt.Errorf("%w: Content-Length %q", ErrMalformed, value)
			}
		}
	}
	if length < 0 {
		return 0, fmt.Errorf("%w: no Content-Length header", ErrMalformed)
	}
	return length, nil
}

// headerReadError classifies a failed header read: the end of the stream is
// clean only before a frame's first byte.
func headerReadError(err error, atStart bool) error {
	switch {
	case err == io.EOF && atStart:
		return io.EOF
	case errors.Is(err, bufio.ErrBufferFull):
		return fmt.Errorf("%w: header line longer than %d bytes", ErrMalformed, maxHeaderBytes)
	default:
		return unexpected(err)
	}
}

// unexpected maps an end of stream inside a frame to io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
