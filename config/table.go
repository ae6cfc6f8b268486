package config

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Variable names, in check order (docs/configuration.md §3 step 1), then
// CODERUN_PYTHON_BIN (step 3).
const (
	VarCPUSeconds        = "CODERUN_CPU_SECONDS"
	VarMaxWallMs         = "CODERUN_MAX_WALL_MS"
	VarAddressSpaceMB    = "CODERUN_ADDRESS_SPACE_MB"
	VarMaxLogBytes       = "CODERUN_MAX_LOG_BYTES"
	VarMaxValueBytes     = "CODERUN_MAX_VALUE_BYTES"
	VarMaxFileBytes      = "CODERUN_MAX_FILE_BYTES"
	VarMaxOutputBytes    = "CODERUN_MAX_OUTPUT_BYTES"
	VarMaxDiskMB         = "CODERUN_MAX_DISK_MB"
	VarGraceMs           = "CODERUN_GRACE_MS"
	VarMaxConcurrentRuns = "CODERUN_MAX_CONCURRENT_RUNS"
	VarMaxQueuedRuns     = "CODERUN_MAX_QUEUED_RUNS"
	VarWarmPool          = "CODERUN_WARM_POOL"
	VarIsolation         = "CODERUN_ISOLATION"
	VarStartMode         = "CODERUN_START_MODE"
	VarMaxSessions       = "CODERUN_MAX_SESSIONS"
	VarSessionIdleMs     = "CODERUN_SESSION_IDLE_MS"
	VarSessionCPUSeconds = "CODERUN_SESSION_CPU_SECONDS"
	VarLogLevel          = "CODERUN_LOG_LEVEL"
	VarMCPConfig         = "CODERUN_MCP_CONFIG"
	VarMaxUpstreamBytes  = "CODERUN_MAX_UPSTREAM_BYTES"
	VarMCPMaxPages       = "CODERUN_MCP_MAX_PAGES"
	VarMCPMaxTools       = "CODERUN_MCP_MAX_TOOLS"
	VarMCPMaxStubBytes   = "CODERUN_MCP_MAX_STUB_BYTES"
	VarMCPListMs         = "CODERUN_MCP_LIST_MS"
	VarMCPToolsTTLMs     = "CODERUN_MCP_TOOLS_TTL_MS"
	VarPythonBin         = "CODERUN_PYTHON_BIN"
	VarPreload           = "CODERUN_PRELOAD"
)

// Service mode's variables (docs/service.md), read in every mode and used by
// `coderun-rpc serve` only.
const (
	VarMaxConnections       = "CODERUN_MAX_CONNECTIONS"
	VarMaxRunsPerConnection = "CODERUN_MAX_RUNS_PER_CONNECTION"
	VarMaxSessionsPerConn   = "CODERUN_MAX_SESSIONS_PER_CONNECTION"
	VarAuthToken            = "CODERUN_AUTH_TOKEN"
	VarDrainMs              = "CODERUN_DRAIN_MS"
	VarWriteStallMs         = "CODERUN_WRITE_STALL_MS"
	VarTraceContent         = "CODERUN_TRACE_CONTENT"
	// The door against an attacker (docs/service.md §2, §4).
	VarMaxUnauthenticated = "CODERUN_MAX_UNAUTHENTICATED"
	VarAuthTimeoutMs      = "CODERUN_AUTH_TIMEOUT_MS"
	VarMaxUnsentBytes     = "CODERUN_MAX_UNSENT_BYTES"
	VarMaxUnsentTotal     = "CODERUN_MAX_UNSENT_BYTES_TOTAL"
)

// Egress (docs/containment.md §6): the policy file, the budgets, and names
// resolved before DNS (tests map names to loopback with it).
const (
	VarEgress            = "CODERUN_EGRESS"
	VarMaxEgressRequests = "CODERUN_MAX_EGRESS_REQUESTS"
	VarMaxEgressBytes    = "CODERUN_MAX_EGRESS_BYTES"
	VarEgressHosts       = "CODERUN_EGRESS_HOSTS"
)

// variable is one row of the configuration table, the only description of
// a variable: envconfig reads it by name (env.go), Load applies its default
// and rule in table order and stores it, and Help prints it.
type variable struct {
	name string
	// def is the default as --help shows it and, unless defaultOf computes
	// the value, the text used when the variable is unset. Either way the
	// default passes through rule like a set value.
	def string
	// defaultOf computes the default from the platform and the variables
	// before this one.
	defaultOf func(c *Config, o Options) string
	rule      rule
	// cross is a rule against the variables before this one, checked after
	// rule: nil when it holds.
	cross func(c *Config, n int64) error
	// set stores the checked value (text as set or defaulted, n its integer
	// value); nil when a later step of Load consumes the text.
	set func(c *Config, text string, n int64)
	// note follows the rule's summary on the --help line.
	note string
	// secret: an error names the variable but shows hiddenValue, never
	// the text.
	secret bool
}

// hiddenValue stands for a secret variable's text in an error line.
const hiddenValue = "<hidden>"

// Defaults computed from the platform and from other variables.
const (
	runsPerCPU  = 2 // CODERUN_MAX_CONCURRENT_RUNS = runsPerCPU × CPUs
	warmDefault = 2 // CODERUN_WARM_POOL = min(warmDefault, concurrent runs)
)

// frameBudget is an output budget's rule: a frame carrying it must fit.
var frameBudget = positive(protocol.BudgetCeiling,
	"a frame carrying it must fit the "+itoa(protocol.FrameCap)+"-byte fd-3 frame cap")

// table is every row: the core's, then each feature's own (packages.go).
var table = slices.Concat(coreRows, packageRows)

var coreRows = []variable{
	{name: VarCPUSeconds, def: "60", note: "; RLIMIT_CPU soft limit (hard = soft + 1)",
		rule: positive(protocol.CPUSecondsCeiling, "it and its +1 hard limit must stay exact JSON integers"),
		set:  func(c *Config, _ string, n int64) { c.Limits.CPUSeconds = n }},
	{name: VarMaxWallMs, def: "600000", note: "; wall-clock budget per run",
		rule: positive(protocol.MaxWallMsCeiling, "the largest whole-millisecond time.Duration"),
		set:  func(c *Config, _ string, n int64) { c.Limits.MaxWallMs = n }},
	{name: VarAddressSpaceMB, def: "512", note: "; RLIMIT_AS per run, must leave room for the output budgets",
		rule: positive(protocol.AddressSpaceMbCeiling, "its byte count must stay an exact JSON integer"),
		set:  func(c *Config, _ string, n int64) { c.Limits.AddressSpaceMb = n }},
	{name: VarMaxLogBytes, def: "65536", note: "; log capture budget per run",
		rule: frameBudget.atLeast(protocol.MinMaxLogBytes, "a marker-only log must fit"),
		set:  func(c *Config, _ string, n int64) { c.Limits.MaxLogBytes = n }},
	{name: VarMaxValueBytes, def: "32768", note: "; serialized completion value budget",
		rule: frameBudget,
		set:  func(c *Config, _ string, n int64) { c.Limits.MaxValueBytes = n }},
	{name: VarMaxFileBytes, def: "16777216", note: "; decoded bytes of a run's files",
		rule: positive(protocol.MaxFileBytesCeiling, ""),
		set:  func(c *Config, _ string, n int64) { c.Limits.MaxFileBytes = n }},
	{name: VarMaxOutputBytes, def: "8388608", note: "; displayed outputs and out/ files per run",
		rule: positive(protocol.MaxOutputBytesCeiling, "one base64 item must fit an fd-3 frame"),
		set:  func(c *Config, _ string, n int64) { c.Limits.MaxOutputBytes = n }},
	{name: VarMaxDiskMB, def: itoa(protocol.DefaultMaxDiskMb), note: "; what a run's (a session's) working directory may hold on disk",
		rule: positive(protocol.MaxDiskMbCeiling, ""),
		set:  func(c *Config, _ string, n int64) { c.Limits.MaxDiskMb = n }},
	{name: VarGraceMs, def: "3000", note: "; SIGTERM → SIGKILL grace",
		rule: positive(protocol.GraceMsCeiling,
			"graceMs + "+itoa(protocol.CloseMargin.Milliseconds())+" must stay a valid time.Duration"),
		set: func(c *Config, _ string, n int64) { c.GraceMs = n }},
	{name: VarMaxConcurrentRuns, def: itoa(runsPerCPU) + " × CPUs", note: "; children running at once",
		defaultOf: func(_ *Config, o Options) string { return itoa(runsPerCPU * int64(o.numCPU())) },
		rule:      count(false),
		set:       func(c *Config, _ string, n int64) { c.MaxConcurrentRuns = clampInt(n) }},
	{name: VarMaxQueuedRuns, def: "1024", note: "; runs waiting for a slot",
		rule: count(true),
		set:  func(c *Config, _ string, n int64) { c.MaxQueuedRuns = clampInt(n) }},
	{name: VarWarmPool, def: "min(" + itoa(warmDefault) + ", max concurrent runs)",
		note:      " ≤ max concurrent runs; pre-started children",
		defaultOf: func(c *Config, _ Options) string { return itoa(min(warmDefault, int64(c.MaxConcurrentRuns))) },
		rule:      count(true),
		cross:     atMostConcurrency,
		set:       func(c *Config, _ string, n int64) { c.WarmPool = clampInt(n) }},
	{name: VarIsolation, def: "auto", note: "; auto = sandbox where the kernel provides it, else process",
		rule: wordRule{words: []string{"process", "sandbox", "auto"}, quoted: true},
		set:  func(c *Config, text string, _ int64) { c.Isolation = text }},
	{name: VarStartMode, def: "auto", note: "; auto = fork",
		rule: wordRule{words: []string{"auto", "fork", "spawn"}, quoted: true},
		set:  func(c *Config, text string, _ int64) { c.StartMode = startMode(text, c.Isolation) }},
	{name: VarMaxSessions, def: "16", note: "; open persistent sessions (0 disables them)",
		rule: count(true),
		set:  func(c *Config, _ string, n int64) { c.MaxSessions = clampInt(n) }},
	{name: VarSessionIdleMs, def: "600000", note: "; a session without a run for this long closes",
		rule: positive(protocol.MaxWallMsCeiling, "the largest whole-millisecond time.Duration"),
		set:  func(c *Config, _ string, n int64) { c.SessionIdleMs = n }},
	{name: VarSessionCPUSeconds, def: "3600", note: "; a session child's lifetime RLIMIT_CPU",
		rule: positive(protocol.CPUSecondsCeiling, "it and its +1 hard limit must stay exact JSON integers"),
		set:  func(c *Config, _ string, n int64) { c.SessionCPUSeconds = n }},
	{name: VarLogLevel, def: "info", note: " (daemon log on stderr)",
		rule: wordRule{words: []string{"debug", "info", "warn", "error"}},
		set: func(c *Config, text string, _ int64) {
			_ = c.LogLevel.UnmarshalText([]byte(text)) // the rule admits only words slog reads
		}},
	{name: VarMCPConfig, def: "none", note: " (docs/mcp.md); --mcp-config FILE overrides it",
		defaultOf: func(*Config, Options) string { return "" },
		rule:      fileRule{what: "mcpServers JSON file"}, set: func(c *Config, text string, _ int64) { c.MCPConfig = text }},
	// Upstream MCP servers' bounds (docs/mcp.md §2.5).
	{name: VarMaxUpstreamBytes, def: "16777216", note: "; bytes of upstream MCP tool results per run",
		rule: positive(protocol.MaxUpstreamBytesCeiling, ""),
		set:  func(c *Config, _ string, n int64) { c.Limits.MaxUpstreamBytes = n }},
	{name: VarMCPMaxPages, def: "64", note: "; tools/list pages read from one upstream",
		rule: count(false),
		set:  func(c *Config, _ string, n int64) { c.MCP.MaxPages = clampInt(n) }},
	{name: VarMCPMaxTools, def: "1000", note: "; tools kept from one upstream",
		rule: count(false),
		set:  func(c *Config, _ string, n int64) { c.MCP.MaxTools = clampInt(n) }},
	{name: VarMCPMaxStubBytes, def: "262144", note: "; names, descriptions and schemas kept from one upstream",
		rule: positive(protocol.MaxUpstreamBytesCeiling, ""),
		set:  func(c *Config, _ string, n int64) { c.MCP.MaxStubBytes = n }},
	{name: VarMCPListMs, def: "10000", note: "; time one upstream's listing may take",
		rule: positive(protocol.MaxWallMsCeiling, "the largest whole-millisecond time.Duration"),
		set:  func(c *Config, _ string, n int64) { c.MCP.ListTimeout = time.Duration(n) * time.Millisecond }},
	{name: VarMCPToolsTTLMs, def: "300000", note: "; an upstream's tool list is listed again in the background after this",
		rule: positive(protocol.MaxWallMsCeiling, "the largest whole-millisecond time.Duration"),
		set:  func(c *Config, _ string, n int64) { c.MCP.ToolsTTL = time.Duration(n) * time.Millisecond }},
	{name: VarPythonBin, def: "python3", note: " (shims resolved)", rule: interpreterRule{}},
	// After the interpreter: Load looks each module up in it (preload.go).
	{name: VarPreload, def: "none", note: "; modules the fork server imports before it serves",
		defaultOf: func(*Config, Options) string { return "" },
		rule:      preloadRule{}, set: func(c *Config, text string, _ int64) { c.Preload = preloadTokens(text) }},
	{name: VarMaxConnections, def: "1024", note: "; serve: connections at once",
		rule: count(false),
		set:  func(c *Config, _ string, n int64) { c.MaxConnections = clampInt(n) }},
	{name: VarMaxRunsPerConnection, def: "64", note: "; serve: runs one connection may have running or queued (0: no cap)",
		rule: count(true),
		set:  func(c *Config, _ string, n int64) { c.MaxRunsPerConnection = clampInt(n) }},
	{name: VarMaxSessionsPerConn, def: "max(1, max sessions / 4)",
		note:      "; serve: sessions one connection may hold open",
		defaultOf: func(c *Config, _ Options) string { return itoa(max(1, int64(c.MaxSessions)/4)) },
		rule:      count(false),
		set:       func(c *Config, _ string, n int64) { c.MaxSessionsPerConnection = clampInt(n) }},
	{name: VarAuthToken, def: "none", defaultOf: func(*Config, Options) string { return "" },
		note: "; serve: required off loopback", rule: secretRule{}, secret: true,
		set: func(c *Config, text string, _ int64) { c.AuthToken = text }},
	{name: VarDrainMs, def: "30000", note: "; serve: how long SIGTERM lets runs finish",
		rule: positive(protocol.MaxWallMsCeiling, "the largest whole-millisecond time.Duration"),
		set:  func(c *Config, _ string, n int64) { c.DrainMs = n }},
	{name: VarWriteStallMs, def: "30000", note: "; serve: a write to a client stalled this long closes it",
		rule: positive(protocol.MaxWallMsCeiling, "the largest whole-millisecond time.Duration"),
		set:  func(c *Config, _ string, n int64) { c.WriteStallMs = n }},
	{name: VarMaxUnauthenticated, def: "64", note: "; serve: connections not yet authenticated (tcp, unix)",
		rule: count(false),
		set:  func(c *Config, _ string, n int64) { c.MaxUnauthenticated = clampInt(n) }},
	{name: VarAuthTimeoutMs, def: "5000", note: "; serve: time to present the token (ws: the upgrade request)",
		rule: positive(protocol.MaxWallMsCeiling, "the largest whole-millisecond time.Duration"),
		set:  func(c *Config, _ string, n int64) { c.AuthTimeoutMs = n }},
	{name: VarMaxUnsentBytes, def: "33554432", note: "; serve: a connection's output not yet taken; past it the connection closes",
		rule: positive(1<<40, ""),
		set:  func(c *Config, _ string, n int64) { c.MaxUnsentBytes = n }},
	{name: VarMaxUnsentTotal, def: "268435456", note: "; serve: every connection's unsent output together",
		rule: positive(1<<40, ""),
		set:  func(c *Config, _ string, n int64) { c.MaxUnsentTotal = n }},
	{name: VarTraceContent, def: "0", note: "; 1: spans record program text and binding arguments",
		rule: wordRule{words: []string{"0", "1"}, quoted: true},
		set:  func(c *Config, text string, _ int64) { c.TraceContent = text == "1" }},
	// Egress (docs/containment.md §6); Load parses the policy file.
	{name: VarEgress, def: "none", note: "; allow-listed HTTP(S) through the daemon's proxy (none: no egress)",
		defaultOf: func(*Config, Options) string { return "" },
		rule:      fileRule{what: "egress policy JSON file"}, set: func(c *Config, text string, _ int64) { c.EgressFile = text }},
	{name: VarMaxEgressRequests, def: "1000", note: "; requests through the egress proxy per run, refused ones included",
		rule: positive(protocol.MaxEgressRequestsCeiling, ""),
		set:  func(c *Config, _ string, n int64) { c.Limits.MaxEgressRequests = n }},
	{name: VarMaxEgressBytes, def: "268435456", note: "; body and tunnel bytes through the egress proxy per run, both ways",
		rule: positive(protocol.MaxEgressBytesCeiling, ""),
		set:  func(c *Config, _ string, n int64) { c.Limits.MaxEgressBytes = n }},
	{name: VarEgressHosts, def: "none", note: "; the egress proxy resolves these names to these addresses before DNS (tests)",
		defaultOf: func(*Config, Options) string { return "" },
		rule:      hostsRule{}, set: func(c *Config, text string, _ int64) { c.EgressHosts, _ = parseHosts(text) }},
}

// atMostConcurrency is the warm pool's cross rule; a default meets it.
func atMostConcurrency(c *Config, n int64) error {
	if limit := int64(c.MaxConcurrentRuns); n > limit {
		return fmt.Errorf("must be at most %s (%d)", VarMaxConcurrentRuns, limit)
	}
	return nil
}

// startMode resolves "auto": fork, served in both tiers.
func startMode(mode, _ string) string {
	if mode != "auto" {
		return mode
	}
	return "fork"
}

// clampInt keeps counts within int on any platform (they are ≤ 2^53 − 1).
func clampInt(v int64) int {
	if int64(int(v)) != v {
		return int(^uint(0) >> 1)
	}
	return int(v)
}

// Help writes --help's list of variables: one line each, in table order,
// with the default and the rule.
func Help(w io.Writer) {
	for _, v := range table {
		fmt.Fprintf(w, "  %-29s default %-28s %s%s\n", v.name, v.def, v.rule.summary(), v.note)
	}
}
