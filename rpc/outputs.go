package rpc

import (
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

var _ session.OutputSink = (*runClient)(nil)

// Output sends one run/output notification (only for runs with stream: true).
func (c *runClient) Output(runID string, ev protocol.OutputEvent) {
	if c.stream {
		c.s.w.buffer(encodeRunOutput(runID, ev))
	}
}

func encodeRunOutput(runID string, ev protocol.OutputEvent) []byte {
	b := wire.AppendHead(make([]byte, 0, 96+len(ev.Data)), "", protocol.MethodRunOutput, "params")
	b = append(append(b, `{"runId":`...), runID...)
	b = strconv.AppendInt(append(b, `,"index":`...), int64(ev.Index), 10)
	b = append(append(b, `,"data":`...), ev.Data...)
	return append(b, "}}"...)
}
