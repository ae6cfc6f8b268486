package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxMessage bounds one message from the client.
const maxMessage = 64 << 20

// Stdio is the MCP stdio transport (newline-delimited JSON-RPC) over in and
// out, with a guard in front of the SDK: a line that is not a JSON-RPC
// message is answered with a parse error (id null) and skipped, so one bad
// line does not end the session (the SDK's own reader would close it).
func Stdio(in io.Reader, out io.WriteCloser, log *slog.Logger) sdk.Transport {
	w := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	go guard(in, pw, w, log)
	return &sdk.IOTransport{Reader: pr, Writer: w, MaxLineLength: maxMessage + 1}
}

// lockedWriter keeps the guard's replies and the SDK's messages (one Write
// each) from interleaving.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// guard copies each well-formed line of in to pw and answers the others.
func guard(in io.Reader, pw *io.PipeWriter, w io.Writer, log *slog.Logger) {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, long, err := readLine(r)
		if long || len(bytes.TrimSpace(line)) > 0 {
			msg := "message longer than " + strconv.Itoa(maxMessage) + " bytes"
			if !long {
				msg = problem(line)
			}
			if msg != "" {
				log.Warn("MCP client sent an unusable message", "problem", msg)
				w.Write(parseError(msg))
			} else if _, werr := pw.Write(append(line, '\n')); werr != nil {
				return
			}
		}
		if err != nil {
			pw.CloseWithError(err)
			return
		}
	}
}

// readLine reads one line without its newline; long reports a line past
// maxMessage, read to its end and not kept.
func readLine(r *bufio.Reader) (line []byte, long bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !long && len(line)+len(chunk) > maxMessage+1 {
			long, line = true, nil
		} else if !long {
			line = append(line, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return bytes.TrimSuffix(line, []byte("\n")), long, err
		}
	}
}

// problem is why line is not a JSON-RPC message ("" when it is one).
func problem(line []byte) string {
	switch {
	case !json.Valid(line):
		return "not JSON"
	case bytes.HasPrefix(bytes.TrimSpace(line), []byte("[")):
		return "" // a batch: the SDK judges it
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		return "not a JSON-RPC message: " + err.Error()
	}
	return ""
}

func parseError(msg string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32700, "message": "parse error: " + msg}})
	return append(b, '\n')
}
