package protocol

// Limits are the budgets of a run. In configuration every field is set; in a
// run request's "limits" a zero field means "not given" (the configured value
// applies), since every legal limit is a positive integer.
type Limits struct {
	CPUSeconds     int64 `json:"cpuSeconds"`
	MaxWallMs      int64 `json:"maxWallMs"`
	AddressSpaceMb int64 `json:"addressSpaceMb"`
	MaxLogBytes    int64 `json:"maxLogBytes"`
	MaxValueBytes  int64 `json:"maxValueBytes"`
	MaxFileBytes   int64 `json:"maxFileBytes"`
	MaxOutputBytes int64 `json:"maxOutputBytes"`
	// MaxDiskMb bounds what the run's working directory (a session's, over
	// its life) holds on disk; the daemon measures it (docs/protocol.md §7).
	MaxDiskMb int64 `json:"maxDiskMb"`
	// MaxUpstreamBytes bounds the bytes of upstream MCP tool results a run
	// may receive, all its calls together (docs/mcp.md §2.5).
	MaxUpstreamBytes int64 `json:"maxUpstreamBytes"`
	// MaxEgressRequests and MaxEgressBytes bound a run's requests through
	// the egress proxy (refused ones included) and the bytes of their bodies
	// and tunnels, both ways (docs/containment.md §6).
	MaxEgressRequests int64 `json:"maxEgressRequests"`
	MaxEgressBytes    int64 `json:"maxEgressBytes"`
}

// Ceilings of the egress budgets.
const (
	MaxEgressRequestsCeiling = 1 << 20
	MaxEgressBytesCeiling    = 1 << 40
)

// EgressEntry is one request a run made through the egress proxy
// (result.egress): never its path, query or headers. Bytes are the
// response body's for a forwarded request, a tunnel's both ways for
// CONNECT.
type EgressEntry struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Method string `json:"method"`
	Status int    `json:"status"`
	Bytes  int64  `json:"bytes"`
	Ms     int64  `json:"ms"`
}

// EgressPolicy is a run's own egress policy as validated against the
// daemon's (package egress's *Policy); nil: the daemon's.
type EgressPolicy interface {
	Entries() []string
}

// MaxUpstreamBytesCeiling is the largest maxUpstreamBytes: 1 GiB, far beyond
// any result a run could use (a binding answer is at most 64 MiB).
const MaxUpstreamBytesCeiling = 1 << 30

// ErrorClass asks the child to inject an exception class for a namespace.
type ErrorClass struct {
	Name               string `json:"name"`
	MemberNameProperty string `json:"memberNameProperty"`
	// Attributes are set on every instance this namespace raises (an mcp
	// binding's "server"); namespaces with the same name and property share
	// one class.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Namespace is one validated binding declaration, as sent in the boot frame.
type Namespace struct {
	Global     string      `json:"global"`
	Names      []string    `json:"names"`
	ErrorClass *ErrorClass `json:"errorClass,omitempty"`
	// Signatures is aligned with Names (nil for an untyped function); left out
	// when no function of the namespace is typed (docs/child-protocol-wire.md §2.2).
	Signatures []*Signature `json:"signatures,omitempty"`
	// Checks is aligned with Names (nil for a function without schemas);
	// nil when no function of the namespace is typed. Never sent.
	Checks []Checker `json:"-"`
	// MCP is the configured upstream server key of a { "global", "mcp" }
	// binding (docs/mcp.md): rpc fills Names from the server's tools before
	// the run starts and routes its calls there. Never sent.
	MCP string `json:"-"`
}

// Checker checks a typed function's values against its declared schemas
// (typed.Function implements it; protocol stays a leaf). Each returns nil
// when the value conforms or nothing is declared, else an error listing the
// failing locations, one per line ("/limit: expected integer, but got string").
type Checker interface {
	CheckArgs(args []byte) error
	CheckResult(value []byte) error
}

// RunParams are validated run params (docs/protocol.md §3.1, docs/protocol.md §3.4).
type RunParams struct {
	Program  string
	Bindings []Namespace
	Limits   Limits // zero fields: use the configured value
	Stream   bool
	Files    []InputFile // written into the working directory before the program starts
	// Traceparent is the W3C trace context of the caller's span ("" for
	// none): the run's span is its child (docs/service.md §7).
	Traceparent string
	// SessionID names the persistent session the run executes in ("" for a
	// fresh run, docs/protocol-sessions.md §11).
	SessionID string
	// Packages are the requirements the run imports, validated and in
	// normal form (docs/packages.md); nil for none.
	Packages []string
	// Egress is the run's own egress policy, a narrowing of the daemon's
	// (nil: the daemon's).
	Egress EgressPolicy
}

// SessionParams are validated session/open params (docs/protocol-sessions.md §11.1):
// Limits are the defaults of the session's runs (zero fields: configured),
// IdleTimeoutMs is 0 when not given.
type SessionParams struct {
	Limits        Limits
	IdleTimeoutMs int64
	Packages      []string // as RunParams.Packages, for every run of the session
	// Egress is the daemon's egress policy with the session's own secrets
	// added (nil: the daemon's).
	Egress EgressPolicy
}

// SessionInfo is the "session" member of a session run's result.
type SessionInfo struct {
	ID     string
	Alive  bool
	Runs   int64
	Reason string // why the session ended; "" while alive
}

// RunError is the "error" member of a run result (docs/protocol.md §3, docs/child-protocol-daemon.md §4.9).
type RunError struct {
	Kind          string
	Message       string
	ExceptionType *string // kind exception, when the child supplied it
	Line          *int64  // kind exception, 1-based
	Path          *string // kind invalid-output: the JSON path of the first refused value
	Hint          *string // kind invalid-output: how to make that value JSON
	Budget        string  // kind timeout: BudgetCPU or BudgetWall
	ExitCode      *int    // kind worker-exit decided at close
	Signal        string  // kind worker-exit decided at close, e.g. "SIGKILL"
}

// Stats are always present in a run result.
type Stats struct {
	WallMs       int64 `json:"wallMs"`
	CPUMs        int64 `json:"cpuMs"`
	MaxRssKb     int64 `json:"maxRssKb"`
	QueueMs      int64 `json:"queueMs"`
	BindingCalls int64 `json:"bindingCalls"`
	LogBytes     int64 `json:"logBytes"`
	// InstallMs is the time the run's packages took to resolve and install,
	// or to find in the cache (docs/packages.md); nil when it asked for none.
	InstallMs *int64 `json:"installMs,omitempty"`
}

// Result is a settled run. Value holds canonical compact JSON (nil when
// absent); Logs entries may hold WTF-8 (lone surrogates encoded as 3-byte
// sequences), which the encoder writes back as \udxxx escapes.
type Result struct {
	Value []byte
	Logs  []string
	Error *RunError
	Stats Stats
	// Outputs and Files (docs/protocol-files.md §12) are never nil in a settled run.
	Outputs []Output
	Files   []OutFile
	// Session is set for a run in a persistent session.
	Session *SessionInfo
	// Egress is the run's requests through the egress proxy; nil when the
	// daemon has no egress policy.
	Egress []EgressEntry
}

// LogEvent is one run/log notification (docs/protocol.md §5).
type LogEvent struct {
	Index     int
	Text      string // WTF-8
	Continued bool
}
