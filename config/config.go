// Package config reads the daemon's configuration once, at start-up, from
// CODERUN_* environment variables (docs/configuration.md §2, docs/configuration.md §3), validates
// every rule in the contract's order and probes the Python interpreter.
// Failures are *Error values; main prints them and exits 2.
//
// One table (table.go) describes every variable: its name, default, rule,
// where its value goes and its --help line. Only main imports config; the
// rest of the daemon receives plain values built from a Config.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// MCPCaps bound each upstream MCP server's tool listing (docs/mcp.md §2.5);
// main hands them to upstream.Caps.
type MCPCaps struct {
	MaxPages     int           // tools/list pages read
	MaxTools     int           // tools kept
	MaxStubBytes int64         // names, descriptions and schemas kept, in bytes
	ListTimeout  time.Duration // one listing's time, connecting included
	ToolsTTL     time.Duration // a list older than this is listed again in the background
}

// Config is the validated configuration.
type Config struct {
	// Python is the frozen interpreter every child runs (shims resolved).
	Python string
	// PythonVersion is "<maj>.<min>.<micro>" as probed.
	PythonVersion string
	// PythonTrees are the files and trees the interpreter reads, which tier
	// sandbox grants read-only (sandbox.InterpreterTrees); nil in tier
	// process, or when the interpreter could not list them.
	PythonTrees       []string
	Limits            protocol.Limits
	GraceMs           int64
	MaxConcurrentRuns int
	MaxQueuedRuns     int
	WarmPool          int
	// Isolation is the tier in force, "process" or "sandbox" ("auto" is
	// resolved by Load); IsolationReason says why, for initialize
	// (docs/protocol.md §2); IsolationFellBack is true when auto chose
	// process because the kernel lacks a sandbox feature (main warns).
	Isolation         string
	IsolationReason   string
	IsolationFellBack bool
	// StartMode is how children start: "fork" (from the fork server, docs/containment-start-modes.md §4)
	// or "spawn" (a fresh interpreter each). "auto" resolves to fork.
	StartMode string
	// Persistent sessions (docs/protocol-sessions.md §11): the cap (0 disables them),
	// the idle time after which one closes, a child's lifetime CPU seconds.
	MaxSessions       int
	SessionIdleMs     int64
	SessionCPUSeconds int64
	LogLevel          slog.Level
	// Preload are the modules the fork server imports before it serves
	// (CODERUN_PRELOAD): dotted names, "?" before an optional one, each
	// found in the interpreter at start-up; PreloadSkipped are the optional
	// ones that were not (main warns of each).
	Preload        []string
	PreloadSkipped []string
	// MCPConfig is the path of the upstream MCP servers file ("": none).
	MCPConfig string
	// MCP bounds what the daemon takes from each upstream MCP server
	// (docs/mcp.md §2.5); Limits.MaxUpstreamBytes is its per-run budget.
	MCP MCPCaps

	// Service mode (docs/service.md).
	MaxConnections       int
	MaxRunsPerConnection int
	// MaxSessionsPerConnection is one connection's share of MaxSessions.
	MaxSessionsPerConnection int
	AuthToken                string // "" for none
	DrainMs                  int64
	WriteStallMs             int64
	// The door (docs/service.md §2, §4): stream connections not yet
	// authenticated at once, how long one may take (ws: its upgrade
	// request), and the bytes of output a connection, and all together, may
	// leave untaken.
	MaxUnauthenticated int
	AuthTimeoutMs      int64
	MaxUnsentBytes     int64
	MaxUnsentTotal     int64
	// Packages: packages on demand (docs/packages.md).
	Packages Packages
	// TraceContent: OpenTelemetry spans record program text and binding
	// arguments (docs/service.md §7).
	TraceContent bool
	// EgressFile is CODERUN_EGRESS ("": no egress), Egress the policy read
	// from it, EgressHosts the names its proxy resolves before DNS
	// (docs/containment.md §6).
	EgressFile  string
	Egress      *egress.Policy
	EgressHosts map[string]netip.Addr
	// Misspelled are the CODERUN_* variables set that are not the table's
	// but nearly spell one of its names: main warns of each, and --check
	// fails on them.
	Misspelled []Misspelling
}

// SessionIdle is SessionIdleMs as a duration.
func (c *Config) SessionIdle() time.Duration {
	return time.Duration(c.SessionIdleMs) * time.Millisecond
}

// Grace is GraceMs as a duration.
func (c *Config) Grace() time.Duration { return time.Duration(c.GraceMs) * time.Millisecond }

// Error is one configuration violation: the variable, its value as set (or
// its default) and the rule text of docs/configuration.md §3.
type Error struct {
	Var, Value, Rule string
}

// Error renders the contract's line without the leading "coderun-rpc: ".
func (e *Error) Error() string {
	return fmt.Sprintf("configuration error: %s=%q: %s", e.Var, e.Value, e.Rule)
}

// Line is the exact stderr line main prints before exiting 2.
func (e *Error) Line() string { return "coderun-rpc: " + e.Error() }

// Options are the start-up facts Load depends on; the zero value uses the
// process's own (environment, working directory, child.Probe).
type Options struct {
	Probe ProbeFunc
	// NumCPU overrides runtime.NumCPU (tests).
	NumCPU int
	// SandboxProbe replaces sandbox.Probe (tests; --check, which lists what
	// it found).
	SandboxProbe func() error
	// InterpreterTrees overrides sandbox.InterpreterTrees (tests).
	InterpreterTrees func(python string) ([]string, error)
}

// Load reads and validates the configuration: every rule of
// docs/configuration.md §3, in its order. A violation is returned as *Error.
// The version probe (step 3) and, unless the tier is process by name, the
// sandbox's probes (step 4) run side by side; their verdicts are judged in
// step order.
func Load(opts Options) (*Config, error) {
	env, err := readEnv()
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	c := &Config{Misspelled: misspelled(os.Environ())}
	texts := make(map[string]string, len(table))
	for i := range table { // step 1, in table order
		v := &table[i]
		if texts[v.name], err = v.apply(c, env, opts); err != nil {
			return nil, err
		}
	}
	if err := checkRoom(c, texts); err != nil { // step 2
		return nil, err
	}
	if err := locateUV(c); err != nil {
		return nil, err
	}
	if err := loadEgress(c); err != nil {
		return nil, err
	}
	python := texts[VarPythonBin]
	abs, rule := locatePython(python)
	if rule != "" {
		return nil, &Error{Var: VarPythonBin, Value: python, Rule: rule}
	}
	sb := startSandboxProbes(c.Isolation, abs, opts)                        // step 4's probes, beside step 3's
	c.Python, c.PythonVersion, err = probePython(python, abs, opts.probe()) // step 3
	sb.wait()
	if err != nil {
		return nil, err
	}
	if err := findPreload(c, texts[VarPreload], opts.probe()); err != nil { // step 3, the preload
		return nil, err
	}
	if err := checkTier(c, texts, sb.featuresErr); err != nil { // step 4
		return nil, err
	}
	if c.Isolation == "sandbox" {
		c.PythonTrees = sb.trees
	}
	if err := openPackageCache(c); err != nil {
		return nil, err
	}
	return c, nil
}

// apply checks v's text (as set in env, else its default) against its rule
// and cross rule, stores it in c and returns it.
func (v *variable) apply(c *Config, env map[string]string, opts Options) (string, error) {
	text, ok := env[v.name]
	if !ok {
		text = v.def
		if v.defaultOf != nil {
			text = v.defaultOf(c, opts)
		}
	}
	n, err := v.rule.parse(text)
	if err == nil && v.cross != nil {
		err = v.cross(c, n)
	}
	if err != nil {
		if v.secret {
			text = hiddenValue
		}
		return "", &Error{Var: v.name, Value: text, Rule: err.Error()}
	}
	if v.set != nil {
		v.set(c, text, n)
	}
	return text, nil
}

func (o Options) numCPU() int {
	if o.NumCPU > 0 {
		return o.NumCPU
	}
	return runtime.NumCPU()
}

// checkRoom is the address-space room (step 2): the baseline, then each
// output budget in turn.
func checkRoom(c *Config, texts map[string]string) error {
	mb := c.Limits.AddressSpaceMb
	if msg := protocol.ConfigRoomBaseline(mb); msg != "" {
		return &Error{Var: VarAddressSpaceMB, Value: texts[VarAddressSpaceMB], Rule: msg}
	}
	for _, b := range []struct {
		name  string
		value int64
	}{{VarMaxLogBytes, c.Limits.MaxLogBytes}, {VarMaxValueBytes, c.Limits.MaxValueBytes},
		{VarMaxOutputBytes, c.Limits.MaxOutputBytes}} {
		if msg := protocol.ConfigRoomBudget(b.value, mb, VarAddressSpaceMB); msg != "" {
			return &Error{Var: b.name, Value: texts[b.name], Rule: msg}
		}
	}
	return nil
}

// checkTier is step 4: tier sandbox needs every kernel feature (never a
// silent downgrade when asked for by name); auto takes the sandbox where
// the kernel provides every feature, else process, and says which.
// featuresErr is the sandbox probe's verdict (unused in tier process).
func checkTier(c *Config, texts map[string]string, featuresErr error) error {
	switch c.Isolation {
	case "process":
		c.IsolationReason = VarIsolation + "=process"
	case "sandbox":
		if err := featuresErr; err != nil {
			return &Error{Var: VarIsolation, Value: texts[VarIsolation], Rule: err.Error()}
		}
		c.IsolationReason = VarIsolation + "=sandbox"
	case "auto":
		if err := featuresErr; err != nil {
			c.Isolation, c.IsolationFellBack = "process", true
			c.IsolationReason = "auto: " + err.Error()
			return nil
		}
		c.Isolation = "sandbox"
		c.IsolationReason = "auto: the kernel provides every sandbox feature (user namespaces, Landlock, seccomp …)"
	}
	return nil
}

// loadEgress reads the egress policy file, if any: an invalid one is one
// error naming the file, the entry and the rule it breaks.
func loadEgress(c *Config) error {
	if c.EgressFile == "" {
		return nil
	}
	p, err := egress.ParseFile(c.EgressFile)
	if err != nil {
		rule := err.Error()
		var fe *egress.FileError
		if errors.As(err, &fe) {
			rule = strings.TrimPrefix(fe.Error(), fe.Path+": ") // the file is the value
		}
		return &Error{Var: VarEgress, Value: c.EgressFile, Rule: rule}
	}
	c.Egress = p
	return nil
}
