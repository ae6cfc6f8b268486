package rpc

import (
	"encoding/json"
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wire"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// Every message the daemon writes is encoded here, on package wire's envelope
// (AppendHead, EncodeError) and run result (EmitRunResult), with one member order:
// "jsonrpc", then "id" when the message has one, then "method" and "params"
// (requests and notifications) or "result" or "error" (responses). Program values
// arrive as canonical JSON already and are copied, never re-scanned (Appendix B item
// 16); strings are WTF-8, written with wireguard.AppendString.

// encodeResult is a response whose result holds no program value (initialize's
// description, shutdown's null): encoding/json writes it.
func encodeResult(id string, result any) []byte {
	raw, err := json.Marshal(result)
	if err != nil {
		raw = []byte("null")
	}
	return append(append(wire.AppendHead(make([]byte, 0, 48+len(raw)), id, "", "result"), raw...), '}')
}

// encodeErrorData is an error response with a data member (raw JSON).
func encodeErrorData(id string, code int64, msg string, data []byte) []byte {
	b := wire.EncodeError(id, code, msg)
	b = append(b[:len(b)-2], `,"data":`...)
	return append(append(b, data...), "}}"...)
}

// encodeSessionClosed is the session/closed notification.
func encodeSessionClosed(sessionID, reason, message string) []byte {
	b := wire.AppendHead(make([]byte, 0, 128+len(message)), "", protocol.MethodSessionClosed, "params")
	b = wireguard.AppendString(append(b, `{"sessionId":`...), sessionID)
	b = wireguard.AppendString(append(b, `,"reason":`...), reason)
	b = wireguard.AppendString(append(b, `,"message":`...), message)
	return append(b, "}}"...)
}

// emitRunResponse produces a run's response body piece by piece through put:
// each log entry is encoded on its own into one reused buffer, so the body,
// which can carry megabytes of logs, is never assembled whole (writer.pieces).
// It produces the same bytes every time it is called with the same result.
func emitRunResponse(id string, r protocol.Result, put func([]byte)) {
	put(wire.AppendHead(make([]byte, 0, 64), id, "", "result"))
	wire.EmitRunResult(r, put)
	put([]byte{'}'})
}

func encodeRunLog(runID string, ev protocol.LogEvent) []byte {
	b := wire.AppendHead(make([]byte, 0, 96+len(ev.Text)), "", protocol.MethodRunLog, "params")
	b = append(append(b, `{"runId":`...), runID...)
	b = strconv.AppendInt(append(b, `,"index":`...), int64(ev.Index), 10)
	b = wireguard.AppendString(append(b, `,"text":`...), ev.Text)
	b = strconv.AppendBool(append(b, `,"continued":`...), ev.Continued)
	return append(b, "}}"...)
}

// encodeBindingCall is a binding/call request; traceparent is left out when "".
func encodeBindingCall(id uint64, runID, namespace, function string, args []byte, traceparent string) []byte {
	b := wire.AppendHead(make([]byte, 0, 192+len(args)), strconv.FormatUint(id, 10), protocol.MethodBindingCall, "params")
	b = append(append(b, `{"runId":`...), runID...)
	b = wireguard.AppendString(append(b, `,"namespace":`...), namespace)
	b = wireguard.AppendString(append(b, `,"function":`...), function)
	b = append(append(b, `,"args":`...), args...)
	if traceparent != "" {
		b = wireguard.AppendString(append(b, `,"traceparent":`...), traceparent)
	}
	return append(b, "}}"...)
}

func encodeCancel(id uint64) []byte {
	b := wire.AppendHead(make([]byte, 0, 80), "", protocol.MethodCancelRequest, "params")
	b = strconv.AppendUint(append(b, `{"id":`...), id, 10)
	return append(b, "}}"...)
}
