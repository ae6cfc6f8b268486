package tracing

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
)

const (
	traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentID = "00f067aa0ba902b7"
	incoming = "00-" + traceID + "-" + parentID + "-01"
)

// peer is the session.Client rpc would give the run: it records the
// traceparent of each binding call and answers it at once, and the outputs
// it is sent.
type peer struct {
	traceparents []string
	outputs      int
}

func (p *peer) Output(string, protocol.OutputEvent) { p.outputs++ }

func (p *peer) CallBinding(runID, ns, fn string, args []byte, answer func(session.Answer)) func() {
	return p.CallBindingTraced(runID, ns, fn, args, "", answer)
}

func (p *peer) CallBindingTraced(_, _, _ string, args []byte, traceparent string, answer func(session.Answer)) func() {
	p.traceparents = append(p.traceparents, traceparent)
	answer(session.Answer{HasResult: true, Result: args})
	return func() {}
}

func (p *peer) Log(string, protocol.LogEvent) {}
func (p *peer) Flush()                        {}

// traceOne runs one traced run through t: a child start, one binding call and
// its result.
func traceOne(t *Tracer, p protocol.RunParams) *peer {
	pr := &peer{}
	c, onResult, _ := t.Start(`"r1"`, p, pr, func(protocol.Result) {})
	if o, ok := c.(session.ChildObserver); ok {
		o.ChildStarted(time.Now().Add(-time.Millisecond), time.Now())
	}
	c.CallBinding(`"r1"`, "tools", "lookup", []byte(`{"q":"secret-arg"}`), func(session.Answer) {})
	onResult(protocol.Result{Value: []byte("1"), Stats: protocol.Stats{WallMs: 3, BindingCalls: 1},
		Egress: []protocol.EgressEntry{{Host: "api.example.com", Port: 443, Method: "CONNECT", Status: 200, Bytes: 5120, Ms: 12}}})
	return pr
}

func TestSpans(t *testing.T) {
	for _, content := range []bool{false, true} {
		mem := tracetest.NewInMemoryExporter()
		tr := New(sdktrace.NewSimpleSpanProcessor(mem), content, "test")
		pr := traceOne(tr, protocol.RunParams{Program: "secret-program", Traceparent: incoming})
		spans := map[string]tracetest.SpanStub{} // read before Shutdown, which empties the exporter
		for _, s := range mem.GetSpans() {
			spans[s.Name] = s
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		run, child, call := spans["run"], spans["child start"], spans["binding/call tools.lookup"]
		if len(spans) != 3 || run.Name == "" || child.Name == "" || call.Name == "" {
			t.Fatalf("spans %v, want run, child start and binding/call tools.lookup", spans)
		}
		if run.SpanContext.TraceID().String() != traceID || run.Parent.SpanID().String() != parentID {
			t.Errorf("run span: trace %s parent %s, want the request's traceparent", run.SpanContext.TraceID(), run.Parent.SpanID())
		}
		for _, s := range []tracetest.SpanStub{child, call} {
			if s.Parent.SpanID() != run.SpanContext.SpanID() {
				t.Errorf("%s: parent %s, want the run span %s", s.Name, s.Parent.SpanID(), run.SpanContext.SpanID())
			}
		}
		// C818: each result.egress entry is an event of the run span.
		if len(run.Events) != 1 || run.Events[0].Name != "egress" || len(run.Events[0].Attributes) != 6 ||
			run.Events[0].Attributes[0].Value.AsString() != "api.example.com" {
			t.Errorf("run span events %+v, want one egress event for api.example.com", run.Events)
		}
		want := "00-" + traceID + "-" + call.SpanContext.SpanID().String() + "-01"
		if len(pr.traceparents) != 1 || pr.traceparents[0] != want {
			t.Errorf("binding/call traceparent %v, want %s (the call's span)", pr.traceparents, want)
		}
		var recorded []string
		for _, s := range []tracetest.SpanStub{run, call} {
			for _, a := range s.Attributes {
				recorded = append(recorded, a.Value.Emit())
			}
		}
		all := strings.Join(recorded, " ")
		if got := strings.Contains(all, "secret-program") && strings.Contains(all, "secret-arg"); got != content {
			t.Errorf("content %v: program and arguments recorded = %v (%s)", content, got, all)
		}
	}
}

// TestNilTracer: without a tracer nothing is wrapped unless the run has a
// traceparent, which binding calls then carry unchanged.
func TestNilTracer(t *testing.T) {
	var tr *Tracer
	pr := &peer{}
	if c, _, _ := tr.Start(`1`, protocol.RunParams{}, pr, func(protocol.Result) {}); c != session.Client(pr) {
		t.Errorf("a run without a traceparent got a wrapped client")
	}
	if got := traceOne(tr, protocol.RunParams{Traceparent: incoming}); len(got.traceparents) != 1 || got.traceparents[0] != incoming {
		t.Errorf("binding/call traceparent %v, want the request's %s", got.traceparents, incoming)
	}
}

// TestOutputsPassThrough: the wrapper forwards run/output to a client
// that takes them (session finds it by the OutputSink interface).
func TestOutputsPassThrough(t *testing.T) {
	pr := &peer{}
	c, _, _ := (*Tracer)(nil).Start(`1`, protocol.RunParams{Traceparent: incoming}, pr, func(protocol.Result) {})
	s, ok := c.(session.OutputSink)
	if !ok {
		t.Fatal("the traced client hides session.OutputSink")
	}
	s.Output(`1`, protocol.OutputEvent{})
	if pr.outputs != 1 {
		t.Errorf("outputs forwarded: %d, want 1", pr.outputs)
	}
}
