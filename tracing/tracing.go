// Package tracing is the daemon's OpenTelemetry tracing (docs/service.md §7):
// a span for each run (the child of the W3C traceparent the run request
// carried), one for the start of its child, and one for each binding call,
// whose own traceparent travels in the binding/call params so the host's
// span for the tool nests under the run.
//
// Spans are exported over OTLP/HTTP only when the OTEL_EXPORTER_OTLP_*
// endpoint variables say where (NewOTLP; the exporter reads them itself).
// Otherwise nothing is recorded: a run without a traceparent is submitted
// exactly as it would be without this package, and one with a traceparent
// only has it passed on to its binding calls. Program text and binding
// arguments are recorded only when the daemon is told to (content).
package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.34.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// Tracer traces runs. The nil *Tracer traces nothing and passes
// traceparents on.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	content  bool
}

var traceContext = propagation.TraceContext{}

// NewOTLP is a Tracer exporting over OTLP/HTTP in batches, configured by
// the standard OTEL_EXPORTER_OTLP_* variables.
func NewOTLP(ctx context.Context, content bool, version string) (*Tracer, error) {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	return New(sdktrace.NewBatchSpanProcessor(exp), content, version), nil
}

// New is a Tracer whose spans go to sp; content says whether program text
// and binding arguments are recorded.
func New(sp sdktrace.SpanProcessor, content bool, version string) *Tracer {
	res := resource.NewSchemaless(semconv.ServiceName("coderun-rpc"), semconv.ServiceVersion(version))
	p := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithResource(res))
	return &Tracer{provider: p, tracer: p.Tracer("github.com/coderun-rpc/coderun-rpc"), content: content}
}

// Shutdown exports what is buffered and stops; nil-safe.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Start begins tracing one run: it returns the client and the result
// callback to submit the run with in place of c and onResult, and refused,
// to call instead when the submission fails (onResult is never called
// then).
func (t *Tracer) Start(runID string, p protocol.RunParams, c session.Client, onResult func(protocol.Result)) (
	session.Client, func(protocol.Result), func(error)) {
	parent := context.Background()
	if p.Traceparent != "" {
		parent = traceContext.Extract(parent, propagation.MapCarrier{"traceparent": p.Traceparent})
	}
	if t == nil {
		if p.Traceparent == "" {
			return c, onResult, func(error) {}
		}
		return &tracedClient{Client: c, ctx: parent}, onResult, func(error) {}
	}
	attrs := []attribute.KeyValue{attribute.String("coderun.run.id", runID)}
	if t.content {
		attrs = append(attrs, attribute.String("coderun.program", p.Program))
	}
	ctx, span := t.tracer.Start(parent, "run", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return &tracedClient{Client: c, t: t, ctx: ctx}, func(r protocol.Result) {
			endRun(span, r)
			onResult(r)
		}, func(err error) {
			span.SetStatus(codes.Error, err.Error())
			span.End()
		}
}

// endRun records a run's outcome and ends its span.
func endRun(span trace.Span, r protocol.Result) {
	kind := "ok"
	if r.Error != nil {
		kind = r.Error.Kind
		span.SetStatus(codes.Error, r.Error.Message)
	}
	span.SetAttributes(attribute.String("coderun.outcome", kind),
		attribute.Int64("coderun.wall_ms", r.Stats.WallMs), attribute.Int64("coderun.cpu_ms", r.Stats.CPUMs),
		attribute.Int64("coderun.queue_ms", r.Stats.QueueMs), attribute.Int64("coderun.binding_calls", r.Stats.BindingCalls))
	for _, e := range r.Egress { // what result.egress holds: never a path, query or header
		span.AddEvent("egress", trace.WithAttributes(attribute.String("coderun.egress.host", e.Host),
			attribute.Int("coderun.egress.port", e.Port), attribute.String("coderun.egress.method", e.Method),
			attribute.Int("coderun.egress.status", e.Status), attribute.Int64("coderun.egress.bytes", e.Bytes),
			attribute.Int64("coderun.egress.ms", e.Ms)))
	}
	span.End()
}

// tracedClient is a run's session.Client under its span (ctx): binding
// calls get spans of their own (when t is set) and carry their traceparent.
type tracedClient struct {
	session.Client
	t   *Tracer // nil: pass the traceparent on only
	ctx context.Context
}

// CallBinding implements session.Client.
func (c *tracedClient) CallBinding(runID, namespace, function string, args []byte, answer func(session.Answer)) func() {
	ctx, end := c.ctx, func(session.Answer) {}
	if c.t != nil {
		attrs := []attribute.KeyValue{attribute.String("coderun.binding", namespace+"."+function)}
		if c.t.content {
			attrs = append(attrs, attribute.String("coderun.binding.args", string(args)))
		}
		var span trace.Span
		ctx, span = c.t.tracer.Start(ctx, "binding/call "+namespace+"."+function,
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		end = func(a session.Answer) {
			if a.HasError {
				span.SetStatus(codes.Error, "the binding failed")
			}
			span.End()
		}
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	answered := func(a session.Answer) { end(a); answer(a) }
	var cancel func()
	if tc, ok := c.Client.(wire.TracedCaller); ok {
		cancel = tc.CallBindingTraced(runID, namespace, function, args, carrier["traceparent"], answered)
	} else {
		cancel = c.Client.CallBinding(runID, namespace, function, args, answered)
	}
	return func() {
		cancel()
		end(session.Answer{})
	}
}

// Output forwards run/output notifications (session.OutputSink) to the
// wrapped client: a wrapper must not hide what the client can take.
func (c *tracedClient) Output(runID string, ev protocol.OutputEvent) {
	if s, ok := c.Client.(session.OutputSink); ok {
		s.Output(runID, ev)
	}
}

// ChildStarted implements session.ChildObserver: the child start span.
func (c *tracedClient) ChildStarted(began, ready time.Time) {
	if c.t == nil {
		return
	}
	_, span := c.t.tracer.Start(c.ctx, "child start", trace.WithTimestamp(began))
	span.End(trace.WithTimestamp(ready))
}

// Runner wraps a Runner so that every run it submits is traced by t.
func Runner(inner wire.Runner, t *Tracer) wire.Runner { return tracedRunner{inner, t} }

type tracedRunner struct {
	wire.Runner
	t *Tracer
}

func (r tracedRunner) Submit(runID string, p protocol.RunParams, c session.Client, onResult func(protocol.Result)) (wire.Canceler, error) {
	c, onResult, refused := r.t.Start(runID, p, c, onResult)
	run, err := r.Runner.Submit(runID, p, c, onResult)
	if err != nil {
		refused(err)
	}
	return run, err
}
