package rpc

import (
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Pre-encoded messages carrying program values (Appendix B item 16): values
// are canonical JSON already, strings are WTF-8 written with appendString.

const jsonrpcHead = `{"jsonrpc":"2.0",`

// emitRunResponse produces a run's response body piece by piece through put:
// each log entry is encoded on its own into one reused buffer, so the body,
// which can carry megabytes of logs, is never assembled whole (writer.pieces).
// It produces the same bytes every time it is called with the same result.
func emitRunResponse(id string, r protocol.Result, put func([]byte)) {
	b := make([]byte, 0, 256)
	b = append(append(append(b, jsonrpcHead...), `"id":`...), id...)
	b = append(b, `,"result":{`...)
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
	b = append(b[:0], ']')
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
	put(append(b, "}}}"...))
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

func encodeRunLog(runID string, ev protocol.LogEvent) []byte {
	b := make([]byte, 0, 96+len(ev.Text))
	b = append(b, jsonrpcHead+`"method":"run/log","params":{"runId":`...)
	b = append(b, runID...)
	b = strconv.AppendInt(append(b, `,"index":`...), int64(ev.Index), 10)
	b = appendString(append(b, `,"text":`...), ev.Text)
	b = strconv.AppendBool(append(b, `,"continued":`...), ev.Continued)
	return append(b, "}}"...)
}

func encodeBindingCall(id uint64, runID, namespace, function string, args []byte) []byte {
	b := make([]byte, 0, 128+len(args))
	b = strconv.AppendUint(append(b, jsonrpcHead+`"id":`...), id, 10)
	b = append(b, `,"method":"binding/call","params":{"runId":`...)
	b = append(b, runID...)
	b = appendString(append(b, `,"namespace":`...), namespace)
	b = appendString(append(b, `,"function":`...), function)
	b = append(append(b, `,"args":`...), args...)
	return append(b, "}}"...)
}

func encodeCancel(id uint64) []byte {
	b := append([]byte(nil), jsonrpcHead+`"method":"$/cancelRequest","params":{"id":`...)
	b = strconv.AppendUint(b, id, 10)
	return append(b, "}}"...)
}
