package protocol

import "strconv"

// Files in, files and rich outputs out (docs/protocol-files.md §12).

// FrameOutput is the child's frame for one displayed object (docs/child-protocol-wire.md §2.2).
const FrameOutput = "output"

// MethodRunOutput is the daemon → client notification for one output.
const MethodRunOutput = "run/output"

// OutDir is the folder under the working directory whose regular files a run returns.
const OutDir = "out"

// Ceilings of the files and outputs budgets (docs/configuration.md §3).
const (
	MaxFileBytesCeiling   = 1073741824
	MaxOutputBytesCeiling = 50331648 // its base64 (4/3) fits one fd-3 frame
	MaxDiskMbCeiling      = 1048576  // 1 TiB
)

// DefaultMaxDiskMb is the disk budget of a daemon configured without one
// (CODERUN_MAX_DISK_MB's default, and a session.Config's that leaves it 0).
const DefaultMaxDiskMb = 512

// What an output costs against the outputs budget beyond its MIME types and
// values (docs/protocol-files.md §12.4), and the caps on its MIME types and on a
// run's outputs. The overheads pay for what the daemon holds and writes for
// an output besides its strings: its list entry, its braces, the quotes,
// colon and comma of each member, its {"data":…} wrapper in the response.
const (
	OutputOverhead      = 32
	OutputEntryOverhead = 8
	MaxOutputEntries    = 64     // MIME types in one output
	MaxOutputs          = 10_000 // outputs in one run, as out/ lists at most 10 000 files
)

// OutputsMarkerPrefix starts the text/plain of the last output of a run whose
// outputs budget ran out.
const OutputsMarkerPrefix = "[coderun] outputs truncated at "

// OutputsMarker is the truncation marker's text for a budget of maxOutputBytes.
func OutputsMarker(maxOutputBytes int64) string {
	return OutputsMarkerPrefix + strconv.FormatInt(maxOutputBytes, 10) + " bytes"
}

// OutputsCountMarker is the truncation marker's text when a run displayed
// more than MaxOutputs objects.
func OutputsCountMarker() string {
	return OutputsMarkerPrefix + strconv.Itoa(MaxOutputs) + " outputs"
}

// OutputMessage is one displayed object from the child: MIME type → content,
// base64 for binary types and text otherwise (IsTextMime). Truncated says the
// child's own count of the budget ran out: this object and every later one are
// dropped (Data is then absent).
type OutputMessage struct {
	Type      string            `json:"type"`
	Data      map[string]string `json:"data,omitempty"`
	Truncated bool              `json:"truncated,omitempty"`
}

// IsTextMime reports whether content of type mime travels as text (else
// base64): text/*, JSON and XML types (SVG among them) and JavaScript.
func IsTextMime(mime string) bool {
	return hasPrefix(mime, "text/") || hasSuffix(mime, "/json") || hasSuffix(mime, "+json") ||
		hasSuffix(mime, "/xml") || hasSuffix(mime, "+xml") || mime == "application/javascript"
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
func hasSuffix(s, p string) bool { return len(s) >= len(p) && s[len(s)-len(p):] == p }

// InputFile is one validated run.files entry: a clean relative path (slash
// separated, no "." or ".." segment, not under out/) and its decoded bytes.
type InputFile struct {
	Path string
	Data []byte
}

// Output is one entry of result.outputs: Data is the canonical JSON object
// {"<mime>": "<content>", …}, written to the client as is.
type Output struct {
	Data []byte
}

// OutFile is one entry of result.files: a regular file under out/. Omitted
// files carry no content (the outputs budget ran out before them).
type OutFile struct {
	Path    string // "out/…", slash separated
	Size    int64
	Data    []byte // raw bytes; nil when Omitted
	Omitted bool
}

// OutputEvent is one run/output notification (docs/protocol-files.md §12).
type OutputEvent struct {
	Index int
	Data  []byte // canonical JSON object, as in Output
}
