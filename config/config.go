// Package config reads the daemon's configuration once, at start-up, from
// CODERUN_* environment variables (SPEC §7, CHILD-CONTRACT §4.1), validates
// every rule in the contract's order and probes the Python interpreter.
// Failures are *Error values; main prints them and exits 2.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/kelseyhightower/envconfig"
)

// Prefix of every variable.
const Prefix = "CODERUN"

// Config is the validated configuration.
type Config struct {
	// Python is the frozen interpreter every child runs (shims resolved).
	Python string
	// PythonVersion is "<maj>.<min>.<micro>" as probed.
	PythonVersion     string
	Limits            protocol.Limits
	GraceMs           int64
	MaxConcurrentRuns int
	MaxQueuedRuns     int
	WarmPool          int
	Isolation         string
	// StartMode is how children start: "fork" (from the fork server, SPEC §9)
	// or "spawn" (a fresh interpreter each). "auto" resolves to fork in tier
	// process and spawn in tier sandbox.
	StartMode string
	LogLevel  slog.Level
}

// Grace is GraceMs as a duration.
func (c *Config) Grace() time.Duration { return time.Duration(c.GraceMs) * time.Millisecond }

// Error is one configuration violation: the variable, its value as set (or
// its default) and the rule text of CHILD-CONTRACT §4.1.
type Error struct {
	Var, Value, Rule string
}

// Error renders the contract's line without the leading "coderun-rpc: ".
func (e *Error) Error() string {
	return fmt.Sprintf("configuration error: %s=%q: %s", e.Var, e.Value, e.Rule)
}

// Line is the exact stderr line main prints before exiting 2.
func (e *Error) Line() string { return "coderun-rpc: " + e.Error() }

// env is the envconfig spec. Field order is the check order of
// CHILD-CONTRACT §4.1 step 1 (envconfig reports the first failing field in
// struct order); names come from split_words, never from envconfig tags
// (v1.4.0 falls back to the unprefixed name for those).
type env struct {
	CPUSeconds        Int[CPUSecondsRule]    `split_words:"true" default:"60"`
	MaxWallMs         Int[WallRule]          `split_words:"true" default:"600000"`
	AddressSpaceMB    Int[AddressSpaceRule]  `split_words:"true" default:"512"`
	MaxLogBytes       Int[LogBytesRule]      `split_words:"true" default:"65536"`
	MaxValueBytes     Int[ValueBytesRule]    `split_words:"true" default:"32768"`
	GraceMs           Int[GraceRule]         `split_words:"true" default:"3000"`
	MaxConcurrentRuns Int[PositiveCountRule] `split_words:"true"`
	MaxQueuedRuns     Int[CountRule]         `split_words:"true" default:"1024"`
	WarmPool          Int[CountRule]         `split_words:"true"`
	Isolation         Choice[IsolationWords] `split_words:"true" default:"process"`
	StartMode         Choice[StartWords]     `split_words:"true" default:"auto"`
	LogLevel          Choice[LevelWords]     `split_words:"true" default:"info"`
	PythonBin         Text                   `split_words:"true" default:"python3"`
}

// Variable names, in check order (the --help listing uses them too).
const (
	VarCPUSeconds        = "CODERUN_CPU_SECONDS"
	VarMaxWallMs         = "CODERUN_MAX_WALL_MS"
	VarAddressSpaceMB    = "CODERUN_ADDRESS_SPACE_MB"
	VarMaxLogBytes       = "CODERUN_MAX_LOG_BYTES"
	VarMaxValueBytes     = "CODERUN_MAX_VALUE_BYTES"
	VarGraceMs           = "CODERUN_GRACE_MS"
	VarMaxConcurrentRuns = "CODERUN_MAX_CONCURRENT_RUNS"
	VarMaxQueuedRuns     = "CODERUN_MAX_QUEUED_RUNS"
	VarWarmPool          = "CODERUN_WARM_POOL"
	VarIsolation         = "CODERUN_ISOLATION"
	VarStartMode         = "CODERUN_START_MODE"
	VarLogLevel          = "CODERUN_LOG_LEVEL"
	VarPythonBin         = "CODERUN_PYTHON_BIN"
)

// Options are the start-up facts Load depends on; the zero value uses the
// process's own (environment, working directory, child.Probe).
type Options struct {
	Probe ProbeFunc
	// NumCPU overrides runtime.NumCPU (tests).
	NumCPU int
	// SandboxProbe overrides sandbox.Probe (tests).
	SandboxProbe func() error
}

// SandboxServed reports whether runs can execute in tier sandbox (child
// provides the tier, session selects it from Config.Isolation). Were it
// false, a kernel with every feature would still be refused rather than
// silently served in tier process.
const SandboxServed = true

// Load reads and validates the configuration (every rule of CHILD-CONTRACT
// §4.1, in order). A violation is returned as *Error.
func Load(opts Options) (*Config, error) {
	var e env
	if err := envconfig.Process(Prefix, &e); err != nil {
		var pe *envconfig.ParseError
		if !errors.As(err, &pe) {
			return nil, fmt.Errorf("reading configuration: %w", err)
		}
		if order(pe.KeyName) > order(VarWarmPool) {
			// The warm-pool cross rule belongs to an earlier variable.
			if werr := checkWarmPool(&e, opts); werr != nil {
				return nil, werr
			}
		}
		return nil, &Error{Var: pe.KeyName, Value: pe.Value, Rule: unwrapRule(pe.Err)}
	}
	if err := checkWarmPool(&e, opts); err != nil {
		return nil, err
	}
	c := build(&e, opts)
	if err := checkRoom(&e); err != nil {
		return nil, err
	}
	py, ver, err := resolvePython(e.PythonBin.Value, opts.probe())
	if err != nil {
		return nil, err
	}
	c.Python, c.PythonVersion = py, ver
	if c.Isolation == "sandbox" {
		// §4.1 step 4: every kernel feature is probed; never a silent downgrade.
		if err := opts.sandboxProbe()(); err != nil {
			return nil, &Error{Var: VarIsolation, Value: e.Isolation.Value, Rule: err.Error()}
		}
		if !SandboxServed {
			return nil, &Error{Var: VarIsolation, Value: e.Isolation.Value,
				Rule: "sandbox isolation is not wired into run execution yet (use process)"}
		}
	}
	if c.Isolation == "sandbox" && e.StartMode.Value == "fork" {
		return nil, &Error{Var: VarStartMode, Value: e.StartMode.Value,
			Rule: `"fork" requires CODERUN_ISOLATION=process (sandboxed children are always spawned)`}
	}
	return c, nil
}

func unwrapRule(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

var checkOrder = []string{VarCPUSeconds, VarMaxWallMs, VarAddressSpaceMB, VarMaxLogBytes,
	VarMaxValueBytes, VarGraceMs, VarMaxConcurrentRuns, VarMaxQueuedRuns, VarWarmPool,
	VarIsolation, VarStartMode, VarLogLevel, VarPythonBin}

func order(name string) int {
	for i, n := range checkOrder {
		if n == name {
			return i
		}
	}
	return len(checkOrder)
}

func (o Options) numCPU() int {
	if o.NumCPU > 0 {
		return o.NumCPU
	}
	return runtime.NumCPU()
}

func effectiveConcurrency(e *env, opts Options) int64 {
	if e.MaxConcurrentRuns.Set {
		return e.MaxConcurrentRuns.Value
	}
	return 2 * int64(opts.numCPU())
}

func checkWarmPool(e *env, opts Options) error {
	n := effectiveConcurrency(e, opts)
	if e.WarmPool.Set && e.WarmPool.Value > n {
		return &Error{Var: VarWarmPool, Value: e.WarmPool.Raw,
			Rule: "must be at most CODERUN_MAX_CONCURRENT_RUNS (" + strconv.FormatInt(n, 10) + ")"}
	}
	return nil
}

func build(e *env, opts Options) *Config {
	n := effectiveConcurrency(e, opts)
	warm := min(2, n)
	if e.WarmPool.Set {
		warm = e.WarmPool.Value
	}
	return &Config{
		Limits: protocol.Limits{
			CPUSeconds:     e.CPUSeconds.Value,
			MaxWallMs:      e.MaxWallMs.Value,
			AddressSpaceMb: e.AddressSpaceMB.Value,
			MaxLogBytes:    e.MaxLogBytes.Value,
			MaxValueBytes:  e.MaxValueBytes.Value,
		},
		GraceMs:           e.GraceMs.Value,
		MaxConcurrentRuns: clampInt(n),
		MaxQueuedRuns:     clampInt(e.MaxQueuedRuns.Value),
		WarmPool:          clampInt(warm),
		Isolation:         e.Isolation.Value,
		StartMode:         startMode(e.StartMode.Value, e.Isolation.Value),
		LogLevel:          levels[e.LogLevel.Value],
	}
}

// startMode resolves "auto": fork where it is served (tier process).
func startMode(mode, isolation string) string {
	if mode != "auto" {
		return mode
	}
	if isolation == "sandbox" {
		return "spawn"
	}
	return "fork"
}

var levels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo,
	"warn": slog.LevelWarn, "error": slog.LevelError}

// clampInt keeps counts within int on any platform (they are ≤ 2^53 − 1).
func clampInt(v int64) int {
	if int64(int(v)) != v {
		return int(^uint(0) >> 1)
	}
	return int(v)
}

func checkRoom(e *env) error {
	mb := e.AddressSpaceMB.Value
	if msg := ConfigRoomBaseline(mb); msg != "" {
		return &Error{Var: VarAddressSpaceMB, Value: e.AddressSpaceMB.Raw, Rule: msg}
	}
	if msg := ConfigRoomBudget(e.MaxLogBytes.Value, mb); msg != "" {
		return &Error{Var: VarMaxLogBytes, Value: e.MaxLogBytes.Raw, Rule: msg}
	}
	if msg := ConfigRoomBudget(e.MaxValueBytes.Value, mb); msg != "" {
		return &Error{Var: VarMaxValueBytes, Value: e.MaxValueBytes.Raw, Rule: msg}
	}
	return nil
}

// Variable documents one variable for --help.
type Variable struct {
	Name, Default, Rule string
}

// Variables lists every variable in check order, then CODERUN_PYTHON_BIN.
var Variables = []Variable{
	{VarCPUSeconds, "60", "positive integer; RLIMIT_CPU soft limit (hard = soft + 1)"},
	{VarMaxWallMs, "600000", "positive integer; wall-clock budget per run"},
	{VarAddressSpaceMB, "512", "positive integer; RLIMIT_AS per run, must leave room for the output budgets"},
	{VarMaxLogBytes, "65536", "integer ≥ 64; log capture budget per run"},
	{VarMaxValueBytes, "32768", "positive integer; serialized completion value budget"},
	{VarGraceMs, "3000", "positive integer; SIGTERM → SIGKILL grace"},
	{VarMaxConcurrentRuns, "2 × CPUs", "positive integer; children running at once"},
	{VarMaxQueuedRuns, "1024", "non-negative integer; runs waiting for a slot"},
	{VarWarmPool, "min(2, max concurrent runs)", "non-negative integer ≤ max concurrent runs; pre-started children"},
	{VarIsolation, "process", `"process" or "sandbox"`},
	{VarStartMode, "auto", `"auto", "fork" or "spawn"; auto = fork in tier process, spawn in tier sandbox`},
	{VarLogLevel, "info", "debug, info, warn or error (daemon log on stderr)"},
	{VarPythonBin, "python3", "path or bare name on PATH; CPython ≥ 3.10 (shims resolved)"},
}
