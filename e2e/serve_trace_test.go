package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSink is an OTLP/HTTP trace receiver: it keeps every span it is sent.
type otlpSink struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans = append(s.spans, ss.Spans...)
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Write(out)
}

func (s *otlpSink) byName() map[string]*tracepb.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]*tracepb.Span{}
	for _, sp := range s.spans {
		m[sp.Name] = sp
	}
	return m
}

// TestServeTracing: with an OTLP endpoint set, a run with a traceparent
// yields a run span under it, a child start span and a binding/call span
// under the run, and the binding/call request carries that span's
// traceparent; program text is not recorded.
func TestServeTracing(t *testing.T) {
	t.Parallel()
	sink := &otlpSink{}
	collectorSrv := httptest.NewServer(sink)
	defer collectorSrv.Close()
	s := startService(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collectorSrv.URL, "OTEL_BSP_SCHEDULE_DELAY": "50"}, sockPath(t))
	c, err := net.Dial("unix", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	callParams := make(chan json.RawMessage, 1)
	conn := newConn(c, 1)
	conn.onRequest = func(m *msg) {
		callParams <- m.Params
		go conn.reply(m, `"result":1`)
	}
	conn.start(c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := conn.Call(ctx, "initialize", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	m, err := conn.Call(ctx, "run", json.RawMessage(`{"program":"secret_program = 1\nreturn await tools.echo(secret_program)",`+
		`"bindings":[{"global":"tools","functions":["echo"]}],"traceparent":"00-`+traceID+`-`+parentID+`-01"}`))
	if err != nil || m.Error != nil {
		t.Fatalf("run: %v %+v", err, m)
	}
	var p struct{ Traceparent string }
	json.Unmarshal(<-callParams, &p)
	if code := s.stop(20 * time.Second); code != 0 { // exports what is buffered
		t.Errorf("exit %d", code)
	}
	spans := sink.byName()
	run, child, call := spans["run"], spans["child start"], spans["binding/call tools.echo"]
	if run == nil || child == nil || call == nil {
		t.Fatalf("spans received: %v; want run, child start, binding/call tools.echo", spans)
	}
	if hex.EncodeToString(run.TraceId) != traceID || hex.EncodeToString(run.ParentSpanId) != parentID {
		t.Errorf("run span: trace %x parent %x, want the request's", run.TraceId, run.ParentSpanId)
	}
	for _, sp := range []*tracepb.Span{child, call} {
		if string(sp.ParentSpanId) != string(run.SpanId) {
			t.Errorf("%s: parent %x, want the run span %x", sp.Name, sp.ParentSpanId, run.SpanId)
		}
	}
	if want := "00-" + traceID + "-" + hex.EncodeToString(call.SpanId) + "-01"; p.Traceparent != want {
		t.Errorf("binding/call traceparent %q, want %q", p.Traceparent, want)
	}
	for _, a := range append(run.Attributes, call.Attributes...) {
		if v := a.Value.GetStringValue(); v != "" && strings.Contains(v, "secret_program") {
			t.Errorf("program text recorded without CODERUN_TRACE_CONTENT=1: %s=%q", a.Key, v)
		}
	}
}
