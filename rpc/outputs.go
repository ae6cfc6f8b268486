package rpc

import (
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

var _ session.OutputSink = (*runClient)(nil)

// Output sends one run/output notification (only for runs with stream: true).
func (c *runClient) Output(runID string, ev protocol.OutputEvent) {
	if c.stream {
		c.s.w.buffer(encodeRunOutput(runID, ev))
	}
}

func encodeRunOutput(runID string, ev protocol.OutputEvent) []byte {
	b := appendHead(make([]byte, 0, 96+len(ev.Data)), "", protocol.MethodRunOutput, "params")
	b = append(append(b, `{"runId":`...), runID...)
	b = strconv.AppendInt(append(b, `,"index":`...), int64(ev.Index), 10)
	b = append(append(b, `,"data":`...), ev.Data...)
	return append(b, "}}"...)
}

// base64Chunk is how many file bytes are encoded at a time (a multiple of 3,
// so the chunks' base64 joins into one valid string).
const base64Chunk = 48 << 10

// emitOutputs puts a result's "outputs" and "files" members (docs/protocol.md
// §12), each only when not empty, after a leading comma. Outputs are spliced
// as kept; a file's bytes are base64-encoded a chunk at a time, so the body
// is never assembled whole.
func emitOutputs(r protocol.Result, put func([]byte)) {
	b := make([]byte, 0, 128)
	if len(r.Outputs) > 0 {
		put([]byte(`,"outputs":[`))
		for i, o := range r.Outputs {
			b = b[:0]
			if i > 0 {
				b = append(b, ',')
			}
			put(append(b, `{"data":`...))
			put(o.Data)
			put([]byte{'}'})
		}
		put([]byte{']'})
	}
	if len(r.Files) > 0 {
		put([]byte(`,"files":[`))
		for i, f := range r.Files {
			emitFile(b[:0], i, f, put)
		}
		put([]byte{']'})
	}
}

func emitFile(b []byte, i int, f protocol.OutFile, put func([]byte)) {
	if i > 0 {
		b = append(b, ',')
	}
	b = appendString(append(b, `{"path":`...), f.Path)
	b = strconv.AppendInt(append(b, `,"size":`...), f.Size, 10)
	if f.Omitted {
		put(append(b, `,"omitted":true}`...))
		return
	}
	put(append(b, `,"base64":"`...))
	wireguard.EncodeBase64(f.Data, base64Chunk, put)
	put([]byte(`"}`))
}
