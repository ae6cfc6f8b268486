// Package protocol is the leaf of coderun-rpc: JSON-RPC method names, error
// codes, failure kinds, limits and the fd-3 frame shapes shared with the
// Python child (py/protocol.py mirrors it; a test keeps the two in step).
// It performs no I/O.
package protocol

import (
	"strconv"
	"strings"
	"time"
)

// JSON-RPC methods, both directions.
const (
	MethodInitialize    = "initialize"
	MethodInitialized   = "initialized"
	MethodShutdown      = "shutdown"
	MethodExit          = "exit"
	MethodCancelRequest = "$/cancelRequest"
	MethodRun           = "run"
	MethodDescribe      = "bindings/describe"
	MethodBindingCall   = "binding/call" // daemon → client request
	MethodRunLog        = "run/log"      // daemon → client notification

	// Persistent sessions (docs/protocol-sessions.md §11).
	MethodSessionOpen   = "session/open"
	MethodSessionFork   = "session/fork"
	MethodSessionClose  = "session/close"
	MethodSessionClosed = "session/closed" // daemon → client notification

	// MethodDiscover answers the OpenRPC description of this surface.
	MethodDiscover = "rpc.discover"
)

// JSON-RPC error codes used by the daemon.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeQueueFull      = -32001
	CodeNotInitialized = -32002
	CodeSessionCap     = -32003 // session/open or session/fork past CODERUN_MAX_SESSIONS
	CodeUnknownSession = -32004 // a session id never issued, closed or lost
	CodeInternalError  = -32603 // an MCP server named by a binding could not be reached; a session child that could not be booted or forked
)

// Failure kinds of a run result (docs/protocol.md §3.6).
const (
	KindException     = "exception"
	KindTimeout       = "timeout"
	KindAbort         = "abort"
	KindWorkerExit    = "worker-exit"
	KindInvalidOutput = "invalid-output"
	KindOutputLimit   = "output-limit"
)

// Budgets named in a timeout.
const (
	BudgetCPU  = "cpu"
	BudgetWall = "wall"
)

// Fixed constants of docs/child-protocol.md Appendix A.
const (
	ProtocolFD            = 3
	FrameCap              = 67108864 // longest fd-3 frame, bytes before '\n'
	FrameProbe            = 65536    // a longer fd-3 frame is judged on this many first bytes
	InboundMessageCap     = 67108864 // longest JSON-RPC body from the client
	HeaderBlockCap        = 4096
	FrameEnvelope         = 64
	BudgetCeiling         = FrameCap - FrameEnvelope // 67108800
	MinMaxLogBytes        = 64
	FragmentCoalescing    = 1024
	CallSlots             = 1024
	CallBacklog           = 1024
	ReplyQueue            = 1024
	CloseMargin           = 2000 * time.Millisecond
	GroupPoll             = 50 * time.Millisecond
	OutputBudgetMultiple  = 12
	InterpreterBaseline   = 67108864
	ProbeDeadline         = 5000 * time.Millisecond
	ProbeOutputKept       = 1024
	MaxWallMsCeiling      = 9223372036854
	GraceMsCeiling        = 9223372034854
	CPUSecondsCeiling     = 9007199254740990
	AddressSpaceMbCeiling = 8589934591
	CountCeiling          = 9007199254740991
	ChildReadSize         = 65536
	ExceptionChainCap     = 100
	NameCut               = 200
	PathCut               = 600 // code points of an invalid-output error's path
	HintCut               = 200 // and of its hint
	UnknownBindingPreview = 1024
	ProgramFilename       = "<program>"
	WrapperFunction       = "__coderun_main__"
)

// Marker texts (docs/child-protocol.md Appendix A).
const (
	MessageMarker      = "… [truncated]"
	ChainMarker        = "[coderun] exception chain truncated at 100 links"
	LogMarkerPrefix    = "[coderun] log capture truncated at "
	FallbackDoneFrame  = `{"type":"done","error":{"kind":"exception","message":"<unrenderable>"}}`
	UnrenderableReject = "<unrenderable rejection value>"
	// HostErrorTypes are the built-in exception types a host's failed binding call
	// raises in the program when the client names one (error.data.type); any other
	// name raises RuntimeError (or the namespace's errorClass, which always wins).
	HostErrorTypes = "BrokenPipeError ConnectionAbortedError ConnectionError ConnectionRefusedError " +
		"ConnectionResetError FileExistsError FileNotFoundError IndexError IsADirectoryError KeyError " +
		"LookupError NotADirectoryError NotImplementedError OSError PermissionError TimeoutError " +
		"TypeError ValueError"
	LosslessResolution = "binding resolution must be lossless JSON"
)

// Fixed messages of the daemon (docs/protocol.md §3.4, docs/child-protocol-wire.md §2.8, docs/child-protocol-daemon.md §4.6, docs/child-protocol-daemon.md §4.8).
const (
	MsgCancelled      = "run cancelled by the client"
	MsgShuttingDown   = "server is shutting down"
	MsgQueueFull      = "run queue is full"
	MsgFrameTooLong   = "protocol frame exceeded 67108864 bytes on fd 3"
	MsgReplyQueueFull = "reply queue exceeded 1024 pending frames on fd 3 (the child stopped consuming its replies)"
	MsgCallBacklog    = "call backlog exceeded 1024 in-flight binding calls (a binding never settled)"
	MsgNonLossless    = "completion value contained a non-lossless number"
)

// LogMarker is the truncation marker for a ledger of maxLogBytes.
func LogMarker(maxLogBytes int64) string {
	return LogMarkerPrefix + strconv.FormatInt(maxLogBytes, 10) + " bytes"
}

// IsHostErrorType reports whether name is one of HostErrorTypes.
func IsHostErrorType(name string) bool {
	for t := range strings.FieldsSeq(HostErrorTypes) {
		if t == name {
			return true
		}
	}
	return false
}
