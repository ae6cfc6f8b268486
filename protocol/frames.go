package protocol

// fd-3 frame types (docs/child-protocol-wire.md §2.2).
const (
	FrameBoot    = "boot"
	FrameRun     = "run"
	FrameReply   = "reply"
	FrameBootAck = "boot-ack"
	FrameCall    = "call"
	FrameLog     = "log"
	FrameDone    = "done"
	// FrameOutput (outputs.go) is the child's displayed object.

	// Session frames (docs/child-protocol-sessions.md §6): the daemon asks an idle
	// session child to fork; the fork answers on its own new channel.
	FrameFork       = "fork"
	FrameForked     = "forked"
	FrameForkFailed = "fork-failed"
	// FrameProxy gives a session child its proxy URL after a fork
	// (docs/containment.md §6).
	FrameProxy = "proxy"
)

// The structs below name every fd-3 frame's fields. Optional fields carry
// ",omitempty" (or are pointers); the mirror test compares these field sets
// with the TypedDicts of py/protocol.py. Values crossing the wire as program
// JSON are raw bytes, never decoded through encoding/json.

// BootMessage is the first daemon frame. Field order is the wire order.
type BootMessage struct {
	Type              string `json:"type"`
	CPUSeconds        int64  `json:"cpuSeconds"`
	AddressSpaceBytes int64  `json:"addressSpaceBytes"`
	// FileSizeBytes is RLIMIT_FSIZE (the disk budget, maxDiskMb × 1048576):
	// a file the program unlinks while it keeps it open escapes the
	// daemon's measure, so each file is held to the budget too.
	FileSizeBytes  int64       `json:"fileSizeBytes,omitempty"`
	MaxLogBytes    int64       `json:"maxLogBytes"`
	MaxValueBytes  int64       `json:"maxValueBytes"`
	MaxOutputBytes int64       `json:"maxOutputBytes"`
	Namespaces     []Namespace `json:"namespaces"`
	// Session marks a session boot (docs/child-protocol-sessions.md §6.1): CPUSeconds is
	// then the session's lifetime total, Namespaces is empty, and the child
	// waits for run frames in its idle loop instead of exiting after one.
	Session bool `json:"session,omitempty"`
	// SysPath are the directories of the run's installed packages
	// (docs/packages.md), put on sys.path before the program runs.
	SysPath []string `json:"sysPath,omitempty"`
	// EgressNote (tier sandbox only) is the text of a program's failed
	// direct connection or name lookup: the run's egress policy and the way
	// out (docs/containment.md §6).
	EgressNote string `json:"egressNote,omitempty"`
	// Env are variables the child sets in its environment before any
	// program runs: the run's (a session's) egress secret placeholders
	// (docs/containment-secrets.md). Written last.
	Env map[string]string `json:"env,omitempty"`
}

// RunMessage carries the program, sent on the first boot-ack. In a session
// (docs/child-protocol-sessions.md §6.2) it also carries the run's own budgets and
// bindings; those four members are left out of a fresh run's frame.
type RunMessage struct {
	Type           string      `json:"type"`
	Program        string      `json:"program"`
	CPUSeconds     int64       `json:"cpuSeconds,omitempty"`
	MaxLogBytes    int64       `json:"maxLogBytes,omitempty"`
	MaxValueBytes  int64       `json:"maxValueBytes,omitempty"`
	MaxOutputBytes int64       `json:"maxOutputBytes,omitempty"`
	Namespaces     []Namespace `json:"namespaces,omitempty"`
	// EgressNote is the boot frame's, for this run of a session (its
	// policy may narrow the daemon's run by run). Last on the wire.
	EgressNote string `json:"egressNote,omitempty"`
}

// ForkMessage asks an idle session child to fork (docs/child-protocol.md
// §6.3). It travels with SCM_RIGHTS [stdout-w, stderr-w, fd3] for the fork;
// Dir is the fork's working directory, already copied by the daemon.
type ForkMessage struct {
	Type string `json:"type"`
	Dir  string `json:"dir"`
}

// ProxyMessage gives an idle session child its proxy URL, with new
// credentials (docs/containment.md §6). After a fork with egress the daemon
// writes one on the fork's channel once the fork is adopted, and one on the
// source's fd 3 once the fork exists (or has failed): each URL reaches only
// the process it is for, and only after the fork copied the source's
// memory, so neither can read the other's credentials out of its own.
type ProxyMessage struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// ForkedMessage is the fork's first frame on its new channel: Pid is the
// fork's pid as its reaper (the fork server or the sandbox init) sees it.
type ForkedMessage struct {
	Type string `json:"type"`
	Pid  int64  `json:"pid"`
}

// ForkFailedMessage is written on the new channel when the source could not fork.
type ForkFailedMessage struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ReplyOk answers an accepted call whose binding resolved losslessly.
type ReplyOk struct {
	Type  string  `json:"type"`
	ID    int64   `json:"id"`
	Ok    bool    `json:"ok"`
	Value RawJSON `json:"value"`
}

// ReplyErr answers a call that was rejected, lossy or unknown. TypeError
// says the daemon refused the arguments against the function's declared
// parameters: the child raises TypeError(Message). ExceptionType, one of
// HostErrorTypes, is the built-in type the host's failure asks for.
type ReplyErr struct {
	Type          string `json:"type"`
	ID            int64  `json:"id"`
	Ok            bool   `json:"ok"`
	Message       string `json:"message"`
	TypeError     bool   `json:"typeError,omitempty"`
	ExceptionType string `json:"exceptionType,omitempty"`
}

// Signature is a typed function's calling shape in the boot frame: what the
// child binds arguments to, and what it shows for __doc__, inspect.signature
// and help(). Field order is the wire order.
type Signature struct {
	Params []Param `json:"params"`
	Doc    string  `json:"doc"`
	Stub   string  `json:"stub"`
	// Kwargs: keywords Params does not name pass to the host (the schema
	// declares additionalProperties); without it they raise TypeError.
	Kwargs bool `json:"kwargs,omitempty"`
}

// Param is one parameter, in stub order. Default is the Python literal text of
// the schema's default, shown by introspection only, never sent as an argument.
type Param struct {
	Name     string  `json:"name"`
	Required bool    `json:"required"`
	Default  *string `json:"default,omitempty"`
}

// BootAckMessage says the child applied its limits and built its namespaces.
type BootAckMessage struct {
	Type string `json:"type"`
}

// CallMessage is a binding call from the child.
type CallMessage struct {
	Type   string  `json:"type"`
	ID     int64   `json:"id"`
	Global string  `json:"global"`
	Name   string  `json:"name"`
	Args   RawJSON `json:"args"`
}

// LogMessage is one entry or fragment of Python-level output.
type LogMessage struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Truncated bool   `json:"truncated,omitempty"`
	Open      bool   `json:"open,omitempty"`
}

// DoneErrorField is the error member of a done frame.
type DoneErrorField struct {
	Kind          string  `json:"kind"`
	Message       string  `json:"message"`
	ExceptionType *string `json:"exceptionType,omitempty"`
	Line          *int64  `json:"line,omitempty"`
	Path          *string `json:"path,omitempty"`
	Hint          *string `json:"hint,omitempty"`
}

// DoneMessage is the child's terminal frame.
type DoneMessage struct {
	Type  string          `json:"type"`
	Value RawJSON         `json:"value,omitempty"`
	Error *DoneErrorField `json:"error,omitempty"`
}

// RawJSON is JSON text carried verbatim (already validated and canonical).
type RawJSON []byte
