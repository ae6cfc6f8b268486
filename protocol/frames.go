package protocol

// fd-3 frame types (docs/child-protocol.md §2.2).
const (
	FrameBoot    = "boot"
	FrameRun     = "run"
	FrameReply   = "reply"
	FrameBootAck = "boot-ack"
	FrameCall    = "call"
	FrameLog     = "log"
	FrameDone    = "done"
	// FrameOutput (outputs.go) is the child's displayed object.
)

// The structs below name every fd-3 frame's fields. Optional fields carry
// ",omitempty" (or are pointers); the mirror test compares these field sets
// with the TypedDicts of py/protocol.py. Values crossing the wire as program
// JSON are raw bytes, never decoded through encoding/json.

// BootMessage is the first daemon frame. Field order is the wire order.
type BootMessage struct {
	Type              string      `json:"type"`
	CPUSeconds        int64       `json:"cpuSeconds"`
	AddressSpaceBytes int64       `json:"addressSpaceBytes"`
	MaxLogBytes       int64       `json:"maxLogBytes"`
	MaxValueBytes     int64       `json:"maxValueBytes"`
	MaxOutputBytes    int64       `json:"maxOutputBytes"`
	Namespaces        []Namespace `json:"namespaces"`
}

// RunMessage carries the program, sent on the first boot-ack.
type RunMessage struct {
	Type    string `json:"type"`
	Program string `json:"program"`
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
// parameters: the child raises TypeError(Message).
type ReplyErr struct {
	Type      string `json:"type"`
	ID        int64  `json:"id"`
	Ok        bool   `json:"ok"`
	Message   string `json:"message"`
	TypeError bool   `json:"typeError,omitempty"`
}

// Signature is a typed function's calling shape in the boot frame: what the
// child binds arguments to, and what it shows for __doc__, inspect.signature
// and help(). Field order is the wire order.
type Signature struct {
	Params []Param `json:"params"`
	Doc    string  `json:"doc"`
	Stub   string  `json:"stub"`
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
}

// DoneMessage is the child's terminal frame.
type DoneMessage struct {
	Type  string          `json:"type"`
	Value RawJSON         `json:"value,omitempty"`
	Error *DoneErrorField `json:"error,omitempty"`
}

// RawJSON is JSON text carried verbatim (already validated and canonical).
type RawJSON []byte
