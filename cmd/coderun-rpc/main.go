// Command coderun-rpc serves Python runs over JSON-RPC 2.0 on stdio, framed
// like the Language Server Protocol (docs/protocol.md). main only reads the
// configuration once, builds the session manager and what initialize
// reports from it, keeps stdout for the protocol, wires signals and slog, and
// hands over to rpc. It is the only importer of config.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/reexec"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
	"github.com/coderun-rpc/coderun-rpc/child/watchdog"
	"github.com/coderun-rpc/coderun-rpc/config"
	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/internal/buildinfo"
	"github.com/coderun-rpc/coderun-rpc/internal/selfcheck"
	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/rpc"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/tracing"
)

// version and commit come from internal/buildinfo.
var version = buildinfo.String()

func main() {
	// First: this binary also serves as the sandbox init and the watchdog,
	// re-executed; such a process becomes that helper here and never returns.
	reexec.Dispatch()
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	// SIGPIPE is notified, not ignored: a closed stdout, stderr or socket
	// must not kill the daemon, and children must not inherit SIG_IGN.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if len(args) > 0 && args[0] == "serve" {
		listen, admin, err := serveArgs(args[1:])
		if err != nil {
			fmt.Fprintf(os.Stderr, "coderun-rpc serve: %v\n", err)
			usage(os.Stderr)
			return 2
		}
		return daemon("", func(ctx context.Context, d *daemonEnv) int { return serveMode(ctx, d, listen, admin) })
	}
	if len(args) == 1 && args[0] == "describe" {
		return describe(os.Stdin, os.Stdout, os.Stderr)
	}
	mode, mcpConfig := "", ""
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "mcp":
			mode = "mcp"
		case "--mcp-config", "-mcp-config":
			if i+1 == len(args) {
				fmt.Fprintln(os.Stderr, "coderun-rpc: --mcp-config needs a file")
				return 2
			}
			i++
			mcpConfig = args[i]
		case "--version", "-version":
			fmt.Println("coderun-rpc", version)
			return 0
		case "--help", "-help", "-h":
			usage(os.Stdout)
			return 0
		case "--check", "-check":
			mode = "check"
		default:
			fmt.Fprintf(os.Stderr, "coderun-rpc: unknown argument %q\n", a)
			usage(os.Stderr)
			return 2
		}
	}
	if mode == "check" {
		return check()
	}
	return daemon(mcpConfig, func(ctx context.Context, d *daemonEnv) int {
		out, err := protocolStdout()
		if err != nil {
			fmt.Fprintf(os.Stderr, "coderun-rpc: cannot set up stdout: %v\n", err)
			return 1
		}
		if mode == "mcp" {
			return serveMCP(ctx, d, out)
		}
		return stdio(ctx, d, out)
	})
}

// stdio serves one client on stdin and the protocol stdout.
func stdio(ctx context.Context, d *daemonEnv, out io.Writer) int {
	growPipe(0)
	opts := serverOptions(d.cfg, os.Stdin, out, d.log, d.proxy, d.preloaded)
	opts.MCP, opts.Runner = d.pool, rpc.WithMCP(tracing.Runner(opts.Runner, d.tr), d.pool, d.cfg.Limits)
	srv := rpc.New(opts)
	d.log.Info("serving", "python", d.cfg.Python, "pythonVersion", d.cfg.PythonVersion,
		"maxConcurrentRuns", d.cfg.MaxConcurrentRuns, "warmPool", d.cfg.WarmPool, "isolation", d.cfg.Isolation)
	return srv.Serve(ctx)
}

// daemonEnv is what daemon gives every serving mode.
type daemonEnv struct {
	cfg  *config.Config
	log  *slog.Logger
	pool *upstream.Pool  // the upstream MCP servers
	tr   *tracing.Tracer // nil: no spans exported
	// proxy is the egress proxy (nil: no CODERUN_EGRESS).
	proxy *egress.Proxy
	// preloaded is the session manager's PreloadDone: it logs the preload,
	// and a failed one ends serving with a configuration error (exit 2).
	preloaded func(session.PreloadStatus)
}

// daemon is what every serving mode shares: the configuration (mcpConfig,
// when set, overrides CODERUN_MCP_CONFIG), the upstream MCP servers, the
// log, the watchdog, the sweep, tracing and the signals; serveFn serves
// until ctx ends.
func daemon(mcpConfig string, serveFn func(ctx context.Context, d *daemonEnv) int) int {
	cfg, err := config.Load(config.Options{})
	if err != nil {
		return configFailure(os.Stderr, err)
	}
	if mcpConfig != "" {
		cfg.MCPConfig = mcpConfig
	}
	specs, err := loadMCP(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "coderun-rpc: %v\n", err)
		return 2
	}
	log := startupLog(cfg, os.Stderr)
	log.Debug("the watchdog and the sandbox's init run from", "binary", sandbox.HelperBinary())
	// Before the first child: from here on a run's process group dies with
	// the daemon, however the daemon dies (docs/containment.md §2–§3). The
	// watchdog runs from the lean helper binary, which starts in a fraction
	// of this binary's time (docs/performance.md §11).
	stopWatchdog, err := watchdog.Start(sandbox.HelperPath(), func(err error) { log.Warn("watchdog", "err", err) })
	if err != nil {
		fmt.Fprintf(os.Stderr, "coderun-rpc: %v\n", err)
		return 1
	}
	defer func() {
		if err := stopWatchdog(); err != nil {
			log.Warn("watchdog", "err", err)
		}
	}()
	go sweep(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, failed := context.WithCancelCause(ctx)
	defer failed(nil)
	tr, err := tracer(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "coderun-rpc: OpenTelemetry exporter: %v\n", err)
		return 1
	}
	pool := upstream.NewPool(specs, buildinfo.Version(), log, upstream.Caps{
		MaxPages: cfg.MCP.MaxPages, MaxTools: cfg.MCP.MaxTools, MaxStubBytes: cfg.MCP.MaxStubBytes,
		ListTimeout: cfg.MCP.ListTimeout, ToolsTTL: cfg.MCP.ToolsTTL, MaxResultBytes: cfg.Limits.MaxUpstreamBytes})
	defer pool.Close()
	proxy, err := egressProxy(cfg, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "coderun-rpc: egress proxy: %v\n", err)
		return 1
	}
	if proxy != nil {
		defer proxy.Close()
	}
	preloaded := func(st session.PreloadStatus) {
		if err := logPreload(log, cfg, st); err != nil {
			failed(err)
		}
	}
	code := serveFn(ctx, &daemonEnv{cfg: cfg, log: log, pool: pool, tr: tr, proxy: proxy, preloaded: preloaded})
	var ce *config.Error
	if errors.As(context.Cause(ctx), &ce) {
		fmt.Fprintln(os.Stderr, ce.Line())
		code = 2
	}
	flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(flush); err != nil {
		log.Warn("exporting the last spans failed", "err", err)
	}
	log.Info("exiting", "code", code)
	return code
}

// startupLog is the daemon's log on w, once it has warned of what in cfg
// is not as asked (misspelled variables, a preload's missing optional
// modules, the sandbox tier's fallback).
func startupLog(cfg *config.Config, w io.Writer) *slog.Logger {
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: cfg.LogLevel}))
	for _, m := range cfg.Misspelled {
		log.Warn("configuration: " + m.Line())
	}
	for _, name := range cfg.PreloadSkipped {
		log.Warn("preload: optional module not installed; not preloaded", "module", name)
	}
	if cfg.IsolationFellBack {
		log.Warn("isolation: tier sandbox is not available here; running tier process", "reason", cfg.IsolationReason)
	}
	return log
}

// describe is `coderun-rpc describe`: bindings/describe's answer for the
// params on in, rendered from the configuration the daemon would load,
// without a fork server, a proxy or a child. Exit 0; 2 for invalid params
// (the method's message) or a configuration error (the start-up line).
func describe(in io.Reader, out, errOut io.Writer) int {
	params, err := io.ReadAll(io.LimitReader(in, protocol.InboundMessageCap+1))
	if err != nil {
		fmt.Fprintf(errOut, "coderun-rpc describe: reading stdin: %v\n", err)
		return 2
	}
	if len(params) > protocol.InboundMessageCap {
		fmt.Fprintf(errOut, "coderun-rpc describe: the params exceed the %d-byte limit of a message\n", protocol.InboundMessageCap)
		return 2
	}
	cfg, err := config.Load(config.Options{})
	if err != nil {
		return configFailure(errOut, err)
	}
	stubs, err := rpcOptions(cfg, startupLog(cfg, errOut)).Daemon.Describe(params)
	if err != nil {
		fmt.Fprintf(errOut, "coderun-rpc describe: %v\n", err)
		return 2
	}
	_, err = io.WriteString(out, stubs)
	if err != nil {
		return 1
	}
	return 0
}

// egressProxy starts the egress proxy when the configuration has a policy.
func egressProxy(cfg *config.Config, log *slog.Logger) (*egress.Proxy, error) {
	if cfg.Egress == nil {
		return nil, nil
	}
	// Tunnels to the hosts of a run's secrets (the policy's or the run's
	// own) are intercepted with this CA.
	ca, err := egress.NewCA(cfg.Egress)
	if err != nil {
		return nil, fmt.Errorf("egress: cannot make the interception CA: %w", err)
	}
	p, err := egress.Listen(egress.Options{Hosts: cfg.EgressHosts, Logger: log, CA: ca})
	if err == nil {
		log.Info("egress proxy", "addr", p.Addr().String(), "allow", strings.Join(cfg.Egress.Entries(), ", "),
			"secrets", strings.Join(cfg.Egress.SecretsText(), "; "))
	}
	return p, err
}

// logPreload logs the first preloaded fork server's outcome; a failure is
// returned as the configuration error it is (docs/configuration.md,
// CODERUN_PRELOAD): the daemon stops serving and exits 2.
func logPreload(log *slog.Logger, cfg *config.Config, st session.PreloadStatus) error {
	for _, m := range st.Skipped {
		log.Warn("preload: optional module failed to import; not preloaded", "module", m.Module, "err", m.Why)
	}
	if st.Err != nil {
		return &config.Error{Var: config.VarPreload, Value: strings.Join(cfg.Preload, ","), Rule: st.Err.Error()}
	}
	log.Info("preload: the fork server is ready", "modules", cfg.Preload,
		"vmSizeMb", st.VmSizeKb/1024, "vmRSSMb", st.VmRSSKb/1024)
	return nil
}

// tracer exports spans over OTLP when an OTEL_EXPORTER_OTLP endpoint is
// set, else is nil (nothing recorded, docs/service.md §7).
func tracer(cfg *config.Config) (*tracing.Tracer, error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	return tracing.NewOTLP(context.Background(), cfg.TraceContent, buildinfo.Version())
}

// sweep removes, in the background (serving does not wait for it), the
// directories that daemons gone before the watchdog could remove them left in
// the directory runs are staged in (rundir.Sweep).
func sweep(log *slog.Logger) {
	dir := os.TempDir()
	n, err := rundir.Sweep(dir)
	if n > 0 {
		log.Info("removed the directories of daemons that are gone", "dir", dir, "count", n)
	}
	if err != nil {
		log.Warn("sweeping the directories of daemons that are gone", "dir", dir, "err", err)
	}
}

// serverOptions are a server's over in/out: a session manager of its own
// built from cfg, and what initialize reports.
func serverOptions(cfg *config.Config, in io.Reader, out io.Writer, log *slog.Logger, proxy *egress.Proxy,
	preloaded func(session.PreloadStatus)) rpc.Options {
	m := newManager(cfg, log, 0, proxy, preloaded)
	o := rpcOptions(cfg, log)
	o.In, o.Out, o.Runner, o.Sessions = in, out, rpc.NewRunner(m), rpc.NewSessions(m)
	reportSessions(&o, cfg, m)
	return o
}

// reportSessions fills in what initialize reports of m's sessions.
func reportSessions(o *rpc.Options, cfg *config.Config, m *session.Manager) {
	o.Daemon.MaxSessions, o.Daemon.SessionIdleMs, o.Daemon.SessionFork = cfg.MaxSessions, cfg.SessionIdleMs, m.ForkAvailable()
}

// newManager builds the session manager cfg describes, in which a lane (a
// serve connection) holds at most sessionsPerLane sessions (0: no share),
// whose children use proxy for egress (nil: none); preloaded is called with
// the preload's outcome (nil: not needed).
func newManager(cfg *config.Config, log *slog.Logger, sessionsPerLane int, proxy *egress.Proxy,
	preloaded func(session.PreloadStatus)) *session.Manager {
	return session.NewManager(session.Config{
		Python:        cfg.Python,
		Limits:        cfg.Limits,
		Grace:         cfg.Grace(),
		MaxConcurrent: cfg.MaxConcurrentRuns,
		MaxQueued:     cfg.MaxQueuedRuns,
		WarmPool:      cfg.WarmPool,
		Logger:        log,
		Isolation:     cfg.Isolation,
		PythonTrees:   cfg.PythonTrees,
		StartMode:     cfg.StartMode,

		MaxSessions:        cfg.MaxSessions,
		MaxSessionsPerLane: sessionsPerLane,
		SessionIdle:        cfg.SessionIdle(),
		SessionCPUSeconds:  cfg.SessionCPUSeconds,
		Packages:           cfg.Packages.Cache,

		Egress:        proxy,
		EgressPolicy:  cfg.Egress,
		Preload:       cfg.Preload,
		MatplotlibDir: true,
		PreloadDone:   preloaded,
	})
}

// rpcOptions are what every server reports and logs with; In, Out and
// Runner are the caller's.
func rpcOptions(cfg *config.Config, log *slog.Logger) rpc.Options {
	return rpc.Options{Logger: log, Version: buildinfo.Version(),
		Daemon: rpc.Daemon{
			Limits:            cfg.Limits,
			GraceMs:           cfg.GraceMs,
			MaxConcurrentRuns: cfg.MaxConcurrentRuns,
			Isolation:         cfg.Isolation,
			IsolationReason:   cfg.IsolationReason,
			Python:            cfg.Python,
			PythonVersion:     cfg.PythonVersion,
			Packages:          cfg.Packages.Allow,
			Egress:            cfg.Egress,
			Preload:           preloadNames(cfg.Preload),
		}}
}

// preloadNames are the preload's module names without their "?" marks.
func preloadNames(tokens []string) []string {
	names := make([]string, len(tokens))
	for i, t := range tokens {
		names[i] = strings.TrimPrefix(t, "?")
	}
	return names
}

func configFailure(w io.Writer, err error) int {
	var ce *config.Error
	if errors.As(err, &ce) {
		fmt.Fprintln(w, ce.Line())
	} else {
		fmt.Fprintf(w, "coderun-rpc: configuration error: %v\n", err)
	}
	return 2
}

// protocolStdout duplicates fd 1 for the protocol and points fd 1 at
// stderr, so a stray write to stdout cannot corrupt a frame (habit 12).
func protocolStdout() (*os.File, error) {
	fd, err := syscall.Dup(1)
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	// A pipe or socket is made non-blocking so the runtime poller manages
	// it and write deadlines work: at teardown a client that stopped
	// reading cannot hold the daemon (rpc bounds each write then). A
	// terminal or file is left as it is (its file description may be
	// shared with the shell).
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) == nil && (st.Mode&syscall.S_IFMT == syscall.S_IFIFO || st.Mode&syscall.S_IFMT == syscall.S_IFSOCK) {
		_ = syscall.SetNonblock(fd, true)
	}
	growPipe(fd)
	if err := syscall.Dup3(2, 1, 0); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "protocol-stdout"), nil
}

// pipeSize is the capacity asked of a protocol pipe: a megabyte result (a
// file or an image in base64) or request crosses in one or two writes instead
// of twenty-two of the default 64 KiB, each a wake-up of the other side.
// Linux lets any process grow a pipe up to /proc/sys/fs/pipe-max-size (1 MiB
// by default).
const pipeSize = 1 << 20

// fSetPipeSz is F_SETPIPE_SZ (linux/fcntl.h), which package syscall lacks.
const fSetPipeSz = 1031

// growPipe asks for pipeSize of capacity when fd is a pipe; anything else, or
// a refusal (a lower pipe-max-size, the user's pipe quota), leaves it as it is.
func growPipe(fd int) {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO {
		_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), fSetPipeSz, pipeSize)
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `coderun-rpc %s — runs LLM-written Python in fresh CPython processes,
speaking JSON-RPC 2.0 with LSP framing on stdin/stdout.

Usage:
  coderun-rpc            serve on stdio
  coderun-rpc serve --listen ADDR [--admin ADDR]
                         service mode: every connection is a client (docs/service.md);
                         ADDR is unix:PATH, tcp:HOST:PORT or ws://HOST:PORT/PATH (--admin: also HOST:PORT)
  coderun-rpc mcp        serve the Model Context Protocol on stdio (docs/mcp.md)
  coderun-rpc describe   print the stubs bindings/describe answers for the params
                         read on stdin, without serving (docs/configuration.md §5)
  --mcp-config FILE      upstream MCP servers (overrides CODERUN_MCP_CONFIG)
  coderun-rpc --check    validate the configuration, probe Python, run a smoke program
  coderun-rpc --version  print the version
  coderun-rpc --help     print this help

Configuration (environment, read once at start-up; an invalid value exits 2):
`, version)
	config.Help(w)
	fmt.Fprintln(w, "\nOther CODERUN_* variables are ignored (one that nearly spells a name above is warned of).")
}

// check is --check: configuration, probe and one smoke run through the
// whole stack, reported readably on stdout. Exit 0 or 2.
func check() int {
	fmt.Println("coderun-rpc --check", version)
	// The configuration's own sandbox probe lists the features it finds,
	// so they are probed once (not at all in tier process by name).
	var features []sandbox.Feature
	cfg, err := config.Load(config.Options{SandboxProbe: func() error {
		features = sandbox.Features()
		return sandbox.Verdict(features)
	}})
	if features != nil {
		printSandboxFeatures(features)
	}
	if err != nil {
		fmt.Println("configuration: FAILED")
		return configFailure(os.Stdout, err)
	}
	if len(cfg.Misspelled) > 0 {
		fmt.Println("configuration: FAILED")
		for _, m := range cfg.Misspelled {
			fmt.Println("coderun-rpc: configuration error: " + m.Line())
		}
		return 2
	}
	fmt.Println("configuration: ok")
	fmt.Printf("python: %s (CPython %s)\n", cfg.Python, cfg.PythonVersion)
	fmt.Printf("limits: cpuSeconds=%d maxWallMs=%d addressSpaceMb=%d maxLogBytes=%d maxValueBytes=%d graceMs=%d\n",
		cfg.Limits.CPUSeconds, cfg.Limits.MaxWallMs, cfg.Limits.AddressSpaceMb, cfg.Limits.MaxLogBytes,
		cfg.Limits.MaxValueBytes, cfg.GraceMs)
	fmt.Printf("runs: maxConcurrentRuns=%d maxQueuedRuns=%d warmPool=%d isolation=%s startMode=%s\n",
		cfg.MaxConcurrentRuns, cfg.MaxQueuedRuns, cfg.WarmPool, cfg.Isolation, cfg.StartMode)
	fmt.Printf("isolation: %s (%s)\n", cfg.Isolation, cfg.IsolationReason)
	if code := checkPackages(cfg.Packages); code != 0 {
		return code
	}
	if cfg.Egress != nil {
		fmt.Printf("egress: allow %s; %s\n", strings.Join(cfg.Egress.Entries(), ", "), rpc.EgressNote(cfg.Isolation))
		if s := cfg.Egress.SecretsText(); len(s) > 0 {
			fmt.Printf("egress secrets (values never shown): %s\n", strings.Join(s, "; "))
		}
	}
	for _, name := range cfg.PreloadSkipped {
		fmt.Printf("preload: optional module %q is not installed; not preloaded\n", name)
	}
	stopWatchdog, err := watchdog.Start(sandbox.HelperPath(), nil)
	if err != nil {
		fmt.Printf("watchdog: FAILED: %v\n", err)
		return 2
	}
	code := smoke(cfg)
	if err := stopWatchdog(); err != nil {
		fmt.Printf("watchdog: FAILED: %v\n", err)
		return 2
	}
	fmt.Println("watchdog: ok (started, watched the smoke run, stopped)")
	return code
}

// smoke runs --check's smoke program and reports it. Exit 0 or 2.
func smoke(cfg *config.Config) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	preload := make(chan session.PreloadStatus, 1)
	serve := func(ctx context.Context, in io.Reader, out io.Writer) int {
		opts := serverOptions(cfg, in, out, log, nil, func(st session.PreloadStatus) { preload <- st })
		if len(cfg.Preload) > 0 {
			select { // the preload is reported before the smoke run, which it then serves
			case st := <-preload:
				preload <- st
			case <-ctx.Done():
			}
		}
		return rpc.New(opts).Serve(ctx)
	}
	report, err := selfcheck.Run(context.Background(), serve)
	if len(cfg.Preload) > 0 {
		if !printPreload(log, cfg, <-preload) {
			err = errors.Join(err, errors.New("the preload failed"))
		}
	}
	fmt.Print(report)
	if err != nil {
		fmt.Printf("smoke run: FAILED: %v\n", err)
		return 2
	}
	fmt.Println("smoke run: ok")
	return 0
}

// printPreload is --check's preload line; false when the preload failed.
func printPreload(log *slog.Logger, cfg *config.Config, st session.PreloadStatus) bool {
	for _, m := range st.Skipped {
		fmt.Printf("preload: optional module %q not preloaded: %s\n", m.Module, m.Why)
	}
	if err := logPreload(log, cfg, st); err != nil {
		fmt.Printf("preload: FAILED\n%s\n", err.(*config.Error).Line())
		return false
	}
	fmt.Printf("preload: ok (%s; fork server %d MiB of address space, %d MiB resident)\n",
		strings.Join(cfg.Preload, ","), st.VmSizeKb/1024, st.VmRSSKb/1024)
	return true
}

func printSandboxFeatures(features []sandbox.Feature) {
	fmt.Println("sandbox features:")
	for _, f := range features {
		mark := "ok     "
		if !f.OK {
			mark = "MISSING"
		}
		fmt.Printf("  %s %s: %s\n", mark, f.Name, f.Detail)
	}
}

// checkPackages reports packages on demand for --check: off, or uv's path
// and version (a uv that does not run fails the check), the allow-list
// and the cache. Exit code 0 or 2.
func checkPackages(p config.Packages) int {
	if !p.Allow.Enabled() {
		fmt.Println("packages: off (" + config.VarPackages + " is empty)")
		return 0
	}
	out, err := exec.Command(p.UV, "--version").Output()
	if err != nil {
		fmt.Printf("packages: FAILED: %s --version: %v\n", p.UV, err)
		return 2
	}
	index := cmp.Or(p.Index, "none")
	fmt.Printf("packages: uv %s (%s); allowed %s; index %s; find-links %s; cache %s (%d MB)\n",
		strings.TrimSpace(strings.TrimPrefix(string(out), "uv ")), p.UV, strings.Join(p.Allow.Describe(), ","),
		index, cmp.Or(strings.Join(p.FindLinks, ","), "none"), p.CacheDir, p.CacheMB)
	return 0
}
