package session

import (
	"errors"
	"log/slog"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/forkserver"
	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
)

// Client is what session needs from the JSON-RPC peer (rpc implements it).
type Client interface {
	// CallBinding sends binding/call {runId, namespace, function, args} (args canonical
	// JSON). answer is invoked at most once, from any goroutine. cancel sends
	// $/cancelRequest for the call and guarantees answer is not invoked afterwards.
	CallBinding(runID string, namespace, function string, args []byte, answer func(Answer)) (cancel func())
	// Log sends one run/log notification. Called in fd-3 frame order, interleaved in
	// order with CallBinding.
	Log(runID string, ev protocol.LogEvent)
	// Flush writes out what CallBinding, Log and the cancels buffered. A client may
	// buffer them until Flush, so a burst of deliveries reaches it in a few writes; the
	// session flushes after each fd-3 read's frames and before a result waits for its
	// run directory, so nothing stays buffered while the run waits.
	Flush()
}

// ChildObserver is an optional interface of a Client: ChildStarted is
// called once the run has its child (warm or started for it), with when
// the run began looking for one and when it got it (tracing's child start
// span, docs/service.md §7).
type ChildObserver interface {
	ChildStarted(began, ready time.Time)
}

// Answer is the client's response to a binding/call, undecoded.
type Answer struct {
	HasResult bool
	Result    []byte  // raw JSON text of "result" (may be lossy, invalid UTF-8 …)
	HasError  bool    // "error" present and not null
	Message   *string // error.message when it is a string (WTF-8)
	// ErrorType is error.data.type when it names one of protocol.HostErrorTypes:
	// the built-in exception the program then receives.
	ErrorType string
}

// Config is the typed configuration the Manager runs with.
type Config struct {
	Python                             string          // frozen interpreter path
	Limits                             protocol.Limits // configured; MaxDiskMb 0: protocol.DefaultMaxDiskMb
	Grace                              time.Duration
	TempDir                            string // parent of run directories
	MaxConcurrent, MaxQueued, WarmPool int
	Logger                             *slog.Logger
	// Isolation selects the tier: "process" (default, also for "") or
	// "sandbox" (child.StartSandboxed; the caller has probed the kernel).
	Isolation string
	// PythonTrees are the trees Python reads, granted read-only in tier
	// sandbox (sandbox.InterpreterTrees); nil: NewManager asks Python.
	PythonTrees []string
	// StartMode is StartSpawn (also for "") or StartFork (in tier sandbox
	// the server forks contained children, docs/containment-start-modes.md §4.1).
	StartMode string
	// Persistent sessions (docs/protocol-sessions.md §11): at most MaxSessions open
	// (0: none), closed after SessionIdle without a run unless opened with
	// a shorter idle time, each child's lifetime RLIMIT_CPU hard limit
	// SessionCPUSeconds.
	MaxSessions int
	// MaxSessionsPerLane is one lane's share of MaxSessions (a serve
	// connection's, CODERUN_MAX_SESSIONS_PER_CONNECTION); 0: no share of
	// its own. The Manager's own sessions (stdio's) count against
	// MaxSessions only.
	MaxSessionsPerLane int
	SessionIdle        time.Duration // 0: DefaultSessionIdle
	SessionCPUSeconds  int64         // 0: DefaultSessionCPUSeconds
	// Packages installs the packages runs and sessions ask for
	// (docs/packages.md); nil: none may be asked for. In tier sandbox its
	// published sets are granted read-only to every child.
	Packages *wheelset.Cache
	// Egress, when set, is the proxy every child is pointed at (its
	// environment's HTTP_PROXY with a token of its own) and EgressPolicy the
	// daemon's policy, a run's unless it narrows it (docs/containment.md §6).
	Egress       *egress.Proxy
	EgressPolicy *egress.Policy
	// Preload are the modules the fork server imports before it serves
	// (CODERUN_PRELOAD, docs/containment-start-modes.md §4.4), each a dotted name, "?"
	// before one that is optional; StartFork only. With a preload the
	// server is started at once, and runs start cold until it is ready.
	Preload []string
	// MatplotlibDir makes the daemon's matplotlib directory (MPLCONFIGDIR
	// with the font cache, built by a helper interpreter at start-up,
	// docs/containment-start-modes.md §4.5). The daemon sets it; without it runs go
	// without the directory and no helper is started.
	MatplotlibDir bool
	// PreloadDone, when set, is called once, from a goroutine, with the
	// first fork server's outcome (a Preload only).
	PreloadDone func(PreloadStatus)
}

// PreloadStatus is what the first preloaded fork server came to: Err nil
// when it serves, the optional modules it skipped and its size; else why
// it could not (a required module failed, it left threads, its address
// space leaves no room for a program, it ended).
type PreloadStatus struct {
	Skipped           []forkserver.ModuleError
	VmSizeKb, VmRSSKb int64
	Err               error
}

// Session defaults for a Config that leaves them zero (the daemon's
// configuration has the same ones, docs/configuration.md).
const (
	DefaultSessionIdle       = 10 * time.Minute
	DefaultSessionCPUSeconds = 3600
)

// Errors returned by Submit; rpc maps them to JSON-RPC codes.
var (
	ErrQueueFull    = errors.New(protocol.MsgQueueFull)
	ErrShuttingDown = errors.New(protocol.MsgShuttingDown)
)

// EffectiveLimits tightens the configured limits by a run's non-zero ones
// (what a run gets, and what bindings/describe reports).
func EffectiveLimits(cfg, run protocol.Limits) protocol.Limits {
	tighten := func(c, r int64) int64 {
		if r > 0 && r < c {
			return r
		}
		return c
	}
	return protocol.Limits{
		CPUSeconds:       tighten(cfg.CPUSeconds, run.CPUSeconds),
		MaxWallMs:        tighten(cfg.MaxWallMs, run.MaxWallMs),
		AddressSpaceMb:   tighten(cfg.AddressSpaceMb, run.AddressSpaceMb),
		MaxLogBytes:      tighten(cfg.MaxLogBytes, run.MaxLogBytes),
		MaxValueBytes:    tighten(cfg.MaxValueBytes, run.MaxValueBytes),
		MaxFileBytes:     tighten(cfg.MaxFileBytes, run.MaxFileBytes),
		MaxOutputBytes:   tighten(cfg.MaxOutputBytes, run.MaxOutputBytes),
		MaxDiskMb:        tighten(cfg.MaxDiskMb, run.MaxDiskMb),
		MaxUpstreamBytes: tighten(cfg.MaxUpstreamBytes, run.MaxUpstreamBytes),

		MaxEgressRequests: tighten(cfg.MaxEgressRequests, run.MaxEgressRequests),
		MaxEgressBytes:    tighten(cfg.MaxEgressBytes, run.MaxEgressBytes),
	}
}
