package wire

import (
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// EmitRunResult produces the run result object alone (docs/protocol.md §3).
func EmitRunResult(r protocol.Result, put func([]byte)) {
	b := append(make([]byte, 0, 256), '{')
	if r.Value != nil && r.Error == nil {
		put(append(b, `"value":`...))
		put(r.Value)
		b = append(b[:0], ',')
	}
	put(append(b, `"logs":[`...))
	for i, l := range r.Logs {
		b = b[:0]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, l)
		put(b)
	}
	put(append(b[:0], ']'))
	emitOutputs(r, put)
	b = b[:0]
	if r.Error != nil {
		b = appendRunError(append(b, `,"error":`...), r.Error)
	}
	s := r.Stats
	b = append(b, `,"stats":{"wallMs":`...)
	b = strconv.AppendInt(b, s.WallMs, 10)
	b = strconv.AppendInt(append(b, `,"cpuMs":`...), s.CPUMs, 10)
	b = strconv.AppendInt(append(b, `,"maxRssKb":`...), s.MaxRssKb, 10)
	b = strconv.AppendInt(append(b, `,"queueMs":`...), s.QueueMs, 10)
	b = strconv.AppendInt(append(b, `,"bindingCalls":`...), s.BindingCalls, 10)
	b = strconv.AppendInt(append(b, `,"logBytes":`...), s.LogBytes, 10)
	if s.InstallMs != nil {
		b = strconv.AppendInt(append(b, `,"installMs":`...), *s.InstallMs, 10)
	}
	b = append(b, '}')
	if si := r.Session; si != nil {
		b = appendString(append(b, `,"session":{"id":`...), si.ID)
		b = strconv.AppendBool(append(b, `,"alive":`...), si.Alive)
		b = strconv.AppendInt(append(b, `,"runs":`...), si.Runs, 10)
		if si.Reason != "" {
			b = appendString(append(b, `,"reason":`...), si.Reason)
		}
		b = append(b, '}')
	}
	if r.Egress != nil {
		b = appendEgress(b, r.Egress)
	}
	put(append(b, '}'))
}

// appendEgress is result.egress: each request the run made through the
// egress proxy (host, port, method, status, bytes, ms).
func appendEgress(b []byte, entries []protocol.EgressEntry) []byte {
	b = append(b, `,"egress":[`...)
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(append(b, `{"host":`...), e.Host)
		b = strconv.AppendInt(append(b, `,"port":`...), int64(e.Port), 10)
		b = appendString(append(b, `,"method":`...), e.Method)
		b = strconv.AppendInt(append(b, `,"status":`...), int64(e.Status), 10)
		b = strconv.AppendInt(append(b, `,"bytes":`...), e.Bytes, 10)
		b = strconv.AppendInt(append(b, `,"ms":`...), e.Ms, 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendRunError(b []byte, e *protocol.RunError) []byte {
	b = appendString(append(b, `{"kind":`...), e.Kind)
	b = appendString(append(b, `,"message":`...), e.Message)
	if e.ExceptionType != nil {
		b = appendString(append(b, `,"exceptionType":`...), *e.ExceptionType)
	}
	if e.Line != nil {
		b = strconv.AppendInt(append(b, `,"line":`...), *e.Line, 10)
	}
	if e.Path != nil {
		b = appendString(append(b, `,"path":`...), *e.Path)
	}
	if e.Hint != nil {
		b = appendString(append(b, `,"hint":`...), *e.Hint)
	}
	if e.Budget != "" {
		b = appendString(append(b, `,"budget":`...), e.Budget)
	}
	if e.ExitCode != nil {
		b = strconv.AppendInt(append(b, `,"exitCode":`...), int64(*e.ExitCode), 10)
	}
	if e.Signal != "" {
		b = appendString(append(b, `,"signal":`...), e.Signal)
	}
	return append(b, '}')
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
