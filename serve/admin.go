package serve

import (
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// metrics are the daemon's Prometheus series, every one named coderun_…
// (docs/service.md §5), plus the Go runtime's and the process's own.
type metrics struct {
	reg      *prometheus.Registry
	runs     *prometheus.CounterVec // by outcome kind
	runTime  prometheus.Histogram
	queue    prometheus.Histogram
	bindings prometheus.Counter
	accepted prometheus.Counter
	refused  *prometheus.CounterVec // by reason
	closed   *prometheus.CounterVec // served connections the daemon closed, by reason
	// Egress through the proxy (docs/containment.md §6), from settled runs'
	// result.egress: requests by result (forwarded, refused) and bytes.
	egressRequests *prometheus.CounterVec
	egressBytes    prometheus.Counter
}

// latencyBuckets span a warm return (about a millisecond) to the default
// wall budget (ten minutes), in seconds.
var latencyBuckets = prometheus.ExponentialBucketsRange(0.0005, 600, 22)

func newMetrics(s *service) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coderun_runs_total",
			Help: "Runs settled, by outcome kind (ok, or the error kind)."}, []string{"kind"}),
		runTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "coderun_run_duration_seconds",
			Help: "Wall time of settled runs (stats.wallMs).", Buckets: latencyBuckets}),
		queue: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "coderun_queue_duration_seconds",
			Help: "Time settled runs waited for a run slot (stats.queueMs).", Buckets: latencyBuckets}),
		bindings: prometheus.NewCounter(prometheus.CounterOpts{Name: "coderun_binding_calls_total",
			Help: "Binding calls made by settled runs."}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "coderun_connections_accepted_total",
			Help: "Connections admitted."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coderun_connections_refused_total",
			Help: "Connections refused, by reason (auth, unauthenticated, max-connections, draining)."}, []string{"reason"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coderun_connections_closed_total",
			Help: "Served connections the daemon closed, by reason (fell-behind)."}, []string{"reason"}),
		egressRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coderun_egress_requests_total",
			Help: "Requests settled runs made through the egress proxy, by result (forwarded, refused)."}, []string{"result"}),
		egressBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "coderun_egress_bytes_total",
			Help: "Response body and tunnel bytes of settled runs' egress requests."}),
	}
	load := func(f func(ld loadView) float64) func() float64 {
		return func() float64 { return f(loadView{s}) }
	}
	m.reg.MustRegister(m.runs, m.runTime, m.queue, m.bindings, m.accepted, m.refused, m.closed,
		m.egressRequests, m.egressBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		gauge("coderun_connections", "Connections being served.", func() float64 { return float64(s.live.Load()) }),
		gauge("coderun_unsent_bytes", "Output queued for clients and not yet taken, every connection's.",
			func() float64 { return float64(s.opts.Unsent()) }),
		gauge("coderun_connections_unauthenticated", "Connections accepted and not yet authenticated (ws: not yet upgraded).",
			func() float64 { return float64(s.pending.Load()) }),
		gauge("coderun_runs_running", "Runs holding a run slot.", load(loadView.running)),
		gauge("coderun_runs_queued", "Runs waiting for a run slot.", load(loadView.queued)),
		gauge("coderun_children_live", "Child processes alive: running runs and warm children.", load(loadView.children)),
		gauge("coderun_warm_pool_ready", "Warm children ready to take a run.", load(loadView.warm)),
		gauge("coderun_sessions", "Persistent sessions open, every connection's.", func() float64 {
			return float64(s.opts.Manager.SessionCount())
		}),
		gauge("coderun_draining", "1 while the daemon drains (SIGTERM), else 0.", func() float64 {
			if s.draining.Load() {
				return 1
			}
			return 0
		}),
	)
	for _, k := range []string{"ok", protocol.KindException, protocol.KindTimeout, protocol.KindAbort,
		protocol.KindWorkerExit, protocol.KindInvalidOutput, protocol.KindOutputLimit} {
		m.runs.WithLabelValues(k) // present at 0 from the start
	}
	m.closed.WithLabelValues("fell-behind")
	m.egressRequests.WithLabelValues("forwarded")
	m.egressRequests.WithLabelValues("refused")
	return m
}

func gauge(name, help string, f func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// loadView reads the Manager's occupancy for one gauge.
type loadView struct{ s *service }

func (v loadView) running() float64 { return float64(v.s.opts.Manager.Load().Running) }
func (v loadView) queued() float64  { return float64(v.s.opts.Manager.Load().Queued) }
func (v loadView) warm() float64    { return float64(v.s.opts.Manager.Load().Warm) }
func (v loadView) children() float64 {
	ld := v.s.opts.Manager.Load()
	return float64(ld.Running + ld.Warm)
}

// observe records one settled run.
func (m *metrics) observe(r protocol.Result) {
	kind := "ok"
	if r.Error != nil {
		kind = r.Error.Kind
	}
	m.runs.WithLabelValues(kind).Inc()
	m.runTime.Observe(float64(r.Stats.WallMs) / 1000)
	m.queue.Observe(float64(r.Stats.QueueMs) / 1000)
	m.bindings.Add(float64(r.Stats.BindingCalls))
	for _, e := range r.Egress {
		result := "forwarded"
		if e.Status == http.StatusForbidden || e.Status == http.StatusProxyAuthRequired {
			result = "refused"
		}
		m.egressRequests.WithLabelValues(result).Inc()
		m.egressBytes.Add(float64(e.Bytes))
	}
}

// adminConnections bounds the admin endpoint's open connections (probes
// and a scraper need a few), so that it too holds a bounded share of the
// descriptors (checkDescriptors counts it among the daemon's own).
const adminConnections = 32

// startAdmin serves /healthz (the process serves), /readyz (it takes
// connections: not while draining) and /metrics on the admin address.
func (s *service) startAdmin() (*http.Server, net.Addr, error) {
	ln, err := net.Listen(s.opts.Admin.network(), s.opts.Admin.Where)
	if err != nil {
		return nil, nil, err
	}
	ln = netutil.LimitListener(ln, adminConnections)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s.draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 30 * time.Second} // an idle keep-alive connection would hold its place for ever
	go func() { _ = srv.Serve(ln) }()
	return srv, ln.Addr(), nil
}
