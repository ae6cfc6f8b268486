package rpc

import (
	"encoding/json"
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Every message the daemon writes is encoded here, with one member order: "jsonrpc",
// then "id" when the message has one, then "method" and "params" (requests and
// notifications) or "result" or "error" (responses). Program values arrive as
// canonical JSON already and are copied, never re-scanned (Appendix B item 16);
// strings are WTF-8, written with appendString.

// appendHead opens a message up to the value of its last member: jsonrpc; the id, as
// JSON text ("" for a notification); the method ("" for a response); then the name
// of the member whose value the caller appends before closing the object.
func appendHead(b []byte, id, method, last string) []byte {
	b = append(b, `{"jsonrpc":"2.0"`...)
	if id != "" {
		b = append(append(b, `,"id":`...), id...)
	}
	if method != "" {
		b = appendString(append(b, `,"method":`...), method)
	}
	return append(append(append(b, `,"`...), last...), `":`...)
}

// encodeResult is a response whose result holds no program value (initialize's
// description, shutdown's null): encoding/json writes it.
func encodeResult(id string, result any) []byte {
	raw, err := json.Marshal(result)
	if err != nil {
		raw = []byte("null")
	}
	return append(append(appendHead(make([]byte, 0, 48+len(raw)), id, "", "result"), raw...), '}')
}

// encodeError is an error response; id is "null" when the request's id is unknown
// or unusable.
func encodeError(id string, code int64, msg string) []byte {
	b := appendHead(make([]byte, 0, 96+len(msg)), id, "", "error")
	b = strconv.AppendInt(append(b, `{"code":`...), code, 10)
	b = appendString(append(b, `,"message":`...), msg)
	return append(b, "}}"...)
}

// encodeErrorData is an error response with a data member (raw JSON).
func encodeErrorData(id string, code int64, msg string, data []byte) []byte {
	b := encodeError(id, code, msg)
	b = append(b[:len(b)-2], `,"data":`...)
	return append(append(b, data...), "}}"...)
}

// encodeSessionClosed is the session/closed notification.
func encodeSessionClosed(sessionID, reason, message string) []byte {
	b := appendHead(make([]byte, 0, 128+len(message)), "", protocol.MethodSessionClosed, "params")
	b = appendString(append(b, `{"sessionId":`...), sessionID)
	b = appendString(append(b, `,"reason":`...), reason)
	b = appendString(append(b, `,"message":`...), message)
	return append(b, "}}"...)
}

// emitRunResponse produces a run's response body piece by piece through put:
// each log entry is encoded on its own into one reused buffer, so the body,
// which can carry megabytes of logs, is never assembled whole (writer.pieces).
// It produces the same bytes every time it is called with the same result.
func emitRunResponse(id string, r protocol.Result, put func([]byte)) {
	put(appendHead(make([]byte, 0, 64), id, "", "result"))
	emitRunResult(r, put)
	put([]byte{'}'})
}

// emitRunResult produces the run result object alone (docs/protocol.md §3).
func emitRunResult(r protocol.Result, put func([]byte)) {
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

func encodeRunLog(runID string, ev protocol.LogEvent) []byte {
	b := appendHead(make([]byte, 0, 96+len(ev.Text)), "", protocol.MethodRunLog, "params")
	b = append(append(b, `{"runId":`...), runID...)
	b = strconv.AppendInt(append(b, `,"index":`...), int64(ev.Index), 10)
	b = appendString(append(b, `,"text":`...), ev.Text)
	b = strconv.AppendBool(append(b, `,"continued":`...), ev.Continued)
	return append(b, "}}"...)
}

// encodeBindingCall is a binding/call request; traceparent is left out when "".
func encodeBindingCall(id uint64, runID, namespace, function string, args []byte, traceparent string) []byte {
	b := appendHead(make([]byte, 0, 192+len(args)), strconv.FormatUint(id, 10), protocol.MethodBindingCall, "params")
	b = append(append(b, `{"runId":`...), runID...)
	b = appendString(append(b, `,"namespace":`...), namespace)
	b = appendString(append(b, `,"function":`...), function)
	b = append(append(b, `,"args":`...), args...)
	if traceparent != "" {
		b = appendString(append(b, `,"traceparent":`...), traceparent)
	}
	return append(b, "}}"...)
}

func encodeCancel(id uint64) []byte {
	b := appendHead(make([]byte, 0, 80), "", protocol.MethodCancelRequest, "params")
	b = strconv.AppendUint(append(b, `{"id":`...), id, 10)
	return append(b, "}}"...)
}
