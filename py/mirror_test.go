package py

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// fieldSet is a frame type's keys split into required and optional ones.
type fieldSet struct {
	Required []string `json:"required"`
	Optional []string `json:"optional"`
}

// roster is docs/child-protocol-wire.md §2.2's field-set roster, the reference both sides must match.
var roster = map[string]fieldSet{
	"BootMessage":       {Required: []string{"addressSpaceBytes", "cpuSeconds", "maxLogBytes", "maxOutputBytes", "maxValueBytes", "namespaces", "type"}, Optional: []string{"egressNote", "env", "fileSizeBytes", "session", "sysPath"}},
	"Namespace":         {Required: []string{"global", "names"}, Optional: []string{"errorClass", "signatures"}},
	"ErrorClass":        {Required: []string{"memberNameProperty", "name"}, Optional: []string{"attributes"}},
	"Signature":         {Required: []string{"doc", "params", "stub"}, Optional: []string{"kwargs"}},
	"Param":             {Required: []string{"name", "required"}, Optional: []string{"default"}},
	"RunMessage":        {Required: []string{"program", "type"}, Optional: []string{"cpuSeconds", "egressNote", "maxLogBytes", "maxOutputBytes", "maxValueBytes", "namespaces"}},
	"BootAckMessage":    {Required: []string{"type"}},
	"CallMessage":       {Required: []string{"args", "global", "id", "name", "type"}},
	"LogMessage":        {Required: []string{"text", "type"}, Optional: []string{"open", "truncated"}},
	"DoneErrorField":    {Required: []string{"kind", "message"}, Optional: []string{"exceptionType", "hint", "line", "path"}},
	"DoneMessage":       {Required: []string{"type"}, Optional: []string{"error", "value"}},
	"ReplyOk":           {Required: []string{"id", "ok", "type", "value"}},
	"ReplyErr":          {Required: []string{"id", "message", "ok", "type"}, Optional: []string{"exceptionType", "typeError"}},
	"OutputMessage":     {Required: []string{"type"}, Optional: []string{"data", "truncated"}},
	"ForkMessage":       {Required: []string{"dir", "type"}},
	"ProxyMessage":      {Required: []string{"type", "url"}},
	"ForkedMessage":     {Required: []string{"pid", "type"}},
	"ForkFailedMessage": {Required: []string{"message", "type"}},
}

// goFrames are the Go frame structs, by the name protocol.py must use for its TypedDict.
var goFrames = map[string]any{
	"BootMessage":       protocol.BootMessage{},
	"Namespace":         protocol.Namespace{},
	"ErrorClass":        protocol.ErrorClass{},
	"Signature":         protocol.Signature{},
	"Param":             protocol.Param{},
	"RunMessage":        protocol.RunMessage{},
	"BootAckMessage":    protocol.BootAckMessage{},
	"CallMessage":       protocol.CallMessage{},
	"LogMessage":        protocol.LogMessage{},
	"DoneErrorField":    protocol.DoneErrorField{},
	"DoneMessage":       protocol.DoneMessage{},
	"ReplyOk":           protocol.ReplyOk{},
	"ReplyErr":          protocol.ReplyErr{},
	"OutputMessage":     protocol.OutputMessage{},
	"ForkMessage":       protocol.ForkMessage{},
	"ForkedMessage":     protocol.ForkedMessage{},
	"ForkFailedMessage": protocol.ForkFailedMessage{},
	"ProxyMessage":      protocol.ProxyMessage{},
}

// goFields derives a struct's field set: omitempty or a pointer makes a key optional.
func goFields(v any) fieldSet {
	var fs fieldSet
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",omitempty,") || f.Type.Kind() == reflect.Pointer {
			fs.Optional = append(fs.Optional, name)
		} else {
			fs.Required = append(fs.Required, name)
		}
	}
	sort.Strings(fs.Required)
	sort.Strings(fs.Optional)
	return fs
}

func norm(fs fieldSet) fieldSet {
	if fs.Required == nil {
		fs.Required = []string{}
	}
	if fs.Optional == nil {
		fs.Optional = []string{}
	}
	sort.Strings(fs.Required)
	sort.Strings(fs.Optional)
	return fs
}

// pySide is what dumpScript prints about py/protocol.py.
type pySide struct {
	Frames     map[string]fieldSet `json:"frames"`
	FrameNames []string            `json:"frameNames"`
	Constants  map[string]any      `json:"constants"`
	Markers    map[string]string   `json:"markers"`
	Typing     bool                `json:"typingAtImport"`
}

const dumpScript = `
import json, sys
sys.path.insert(0, ".")
typing_before = "typing" in sys.modules
import protocol as p
typing_at_import = not typing_before and "typing" in sys.modules
names = [n for n in dir(p) if n.isupper()]
consts = {n: getattr(p, n) for n in names if isinstance(getattr(p, n), (int, str))}
frames = p.frame_fields()
public = sorted(n for n in p.FRAME_TYPES if not n.startswith("_"))
print(json.dumps({"frames": frames, "frameNames": public, "constants": consts,
                  "markers": {str(b): p.log_truncation_marker(b) for b in (1, 65536, 1048576)},
                  "typingAtImport": typing_at_import}))
`

func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not available")
	}
	return py
}

func dumpPython(t *testing.T) pySide {
	t.Helper()
	cmd := exec.Command(python(t), "-I", "-c", dumpScript)
	cmd.Dir = "."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 dump failed: %v\n%s", err, stderr.String())
	}
	var side pySide
	if err := json.Unmarshal(out, &side); err != nil {
		t.Fatalf("decoding the python dump: %v\n%s", err, out)
	}
	return side
}

// C221: every frame type has the same field set on both sides, and both equal the roster.
func TestMirrorFrameFields(t *testing.T) {
	side := dumpPython(t)
	var goNames, rosterNames []string
	for name := range goFrames {
		goNames = append(goNames, name)
	}
	for name := range roster {
		rosterNames = append(rosterNames, name)
	}
	sort.Strings(goNames)
	sort.Strings(rosterNames)
	if !reflect.DeepEqual(goNames, rosterNames) || !reflect.DeepEqual(side.FrameNames, rosterNames) {
		t.Fatalf("frame names differ:\n go     %v\n python %v\n roster %v", goNames, side.FrameNames, rosterNames)
	}
	for name, v := range goFrames {
		want := norm(roster[name])
		if got := norm(goFields(v)); !reflect.DeepEqual(got, want) {
			t.Errorf("Go %s = %+v, roster %+v", name, got, want)
		}
		if got := norm(side.Frames[name]); !reflect.DeepEqual(got, want) {
			t.Errorf("Python %s = %+v, roster %+v", name, got, want)
		}
	}
	if side.Typing {
		t.Errorf("importing protocol.py imported typing; the frame TypedDicts must stay lazy")
	}
}

// C220: fd 3, the log marker, the chain and message markers and the other shared constants.
func TestMirrorConstants(t *testing.T) {
	side := dumpPython(t)
	want := map[string]any{
		"PROTOCOL_FD":            protocol.ProtocolFD,
		"FRAME_CAP":              protocol.FrameCap,
		"FRAME_ENVELOPE":         protocol.FrameEnvelope,
		"BUDGET_CEILING":         protocol.BudgetCeiling,
		"MIN_MAX_LOG_BYTES":      protocol.MinMaxLogBytes,
		"FRAGMENT_COALESCING":    protocol.FragmentCoalescing,
		"CALL_SLOTS":             protocol.CallSlots,
		"OUTPUT_BUDGET_MULTIPLE": protocol.OutputBudgetMultiple,
		"INTERPRETER_BASELINE":   protocol.InterpreterBaseline,
		"CHILD_READ_SIZE":        protocol.ChildReadSize,
		"EXCEPTION_CHAIN_CAP":    protocol.ExceptionChainCap,
		"NAME_CUT":               protocol.NameCut,
		"PROGRAM_FILENAME":       protocol.ProgramFilename,
		"WRAPPER_FUNCTION":       protocol.WrapperFunction,
		"MESSAGE_MARKER":         protocol.MessageMarker,
		"CHAIN_MARKER":           protocol.ChainMarker,
		"LOG_MARKER_PREFIX":      protocol.LogMarkerPrefix,
		"FALLBACK_DONE_FRAME":    protocol.FallbackDoneFrame,
		"UNRENDERABLE_REJECTION": protocol.UnrenderableReject,
		"HOST_ERROR_TYPES":       protocol.HostErrorTypes,
		"FRAME_BOOT":             protocol.FrameBoot,
		"FRAME_RUN":              protocol.FrameRun,
		"FRAME_REPLY":            protocol.FrameReply,
		"FRAME_BOOT_ACK":         protocol.FrameBootAck,
		"FRAME_CALL":             protocol.FrameCall,
		"FRAME_LOG":              protocol.FrameLog,
		"FRAME_DONE":             protocol.FrameDone,
		"FRAME_OUTPUT":           protocol.FrameOutput,
		"OUTPUTS_MARKER_PREFIX":  protocol.OutputsMarkerPrefix,
		"OUTPUT_OVERHEAD":        protocol.OutputOverhead,
		"OUTPUT_ENTRY_OVERHEAD":  protocol.OutputEntryOverhead,
		"MAX_OUTPUT_ENTRIES":     protocol.MaxOutputEntries,
		"MAX_OUTPUTS":            protocol.MaxOutputs,
		"FRAME_FORK":             protocol.FrameFork,
		"FRAME_FORKED":           protocol.FrameForked,
		"FRAME_FORK_FAILED":      protocol.FrameForkFailed,
		"FRAME_PROXY":            protocol.FrameProxy,
		"KIND_EXCEPTION":         protocol.KindException,
		"KIND_INVALID_OUTPUT":    protocol.KindInvalidOutput,
		"KIND_OUTPUT_LIMIT":      protocol.KindOutputLimit,
	}
	for name, w := range want {
		got, ok := side.Constants[name]
		if !ok {
			t.Errorf("protocol.py lacks %s", name)
			continue
		}
		switch w := w.(type) {
		case string:
			if got != w {
				t.Errorf("%s: python %q, go %q", name, got, w)
			}
		case int:
			if f, ok := got.(float64); !ok || int64(f) != int64(w) {
				t.Errorf("%s: python %v, go %d", name, got, w)
			}
		}
	}
	if protocol.ProtocolFD != 3 {
		t.Errorf("Go protocol fd = %d", protocol.ProtocolFD)
	}
	for _, b := range []int64{1, 65536, 1048576} {
		if got := side.Markers[jsonInt(b)]; got != protocol.LogMarker(b) {
			t.Errorf("log_truncation_marker(%d): python %q, go %q", b, got, protocol.LogMarker(b))
		}
	}
	if len(protocol.MessageMarker) != 15 {
		t.Errorf("message marker is %d bytes", len(protocol.MessageMarker))
	}
}

func jsonInt(b int64) string {
	out, _ := json.Marshal(b)
	return string(out)
}

// C222: the embedded files are byte-identical to py/bootstrap.py and py/protocol.py.
func TestEmbeddedFilesMatch(t *testing.T) {
	for name, embedded := range map[string][]byte{"bootstrap.py": Bootstrap, "protocol.py": Protocol} {
		disk, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("py/%s: %v", name, err)
		}
		if len(embedded) == 0 || !bytes.Equal(disk, embedded) {
			t.Errorf("embedded %s (%d bytes) differs from py/%s (%d bytes)", name, len(embedded), name, len(disk))
		}
	}
	if fi, err := os.Stat("."); err != nil || !fi.IsDir() {
		t.Errorf("the py/ directory is missing")
	}
	// The bootstrap takes its protocol fd from protocol.py, which the constants test pins.
	if !bytes.Contains(Bootstrap, []byte("FD = P.PROTOCOL_FD")) {
		t.Errorf("bootstrap.py does not take its fd from protocol.PROTOCOL_FD")
	}
}
