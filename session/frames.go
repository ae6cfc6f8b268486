package session

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// Daemon → child frames are built by hand from trusted data: key order is the
// wire order of docs/child-protocol-wire.md §2.2, strings go through wireguard.AppendString
// (WTF-8 aware: a lone surrogate becomes \udxxx), reply values are canonical
// bytes spliced in raw.

// bootFrame encodes the boot frame with the run's effective limits.
func bootFrame(lim protocol.Limits, namespaces []protocol.Namespace, sysPath []string) []byte {
	b := []byte(`{"type":"boot","cpuSeconds":`)
	b = strconv.AppendInt(b, lim.CPUSeconds, 10)
	b = append(b, `,"addressSpaceBytes":`...)
	b = strconv.AppendInt(b, lim.AddressSpaceMb*1048576, 10)
	if lim.MaxDiskMb > 0 {
		b = append(b, `,"fileSizeBytes":`...)
		b = strconv.AppendInt(b, lim.MaxDiskMb*protocol.MiB, 10)
	}
	b = appendNamespaces(appendOutputBudgets(b, lim), namespaces)
	if len(sysPath) > 0 {
		b = append(b, `,"sysPath":[`...)
		for i, p := range sysPath {
			if i > 0 {
				b = append(b, ',')
			}
			b = wireguard.AppendString(b, p)
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendOutputBudgets writes the maxLogBytes, maxValueBytes and
// maxOutputBytes members, which boot and session run frames share.
func appendOutputBudgets(b []byte, lim protocol.Limits) []byte {
	b = append(b, `,"maxLogBytes":`...)
	b = strconv.AppendInt(b, lim.MaxLogBytes, 10)
	b = append(b, `,"maxValueBytes":`...)
	b = strconv.AppendInt(b, lim.MaxValueBytes, 10)
	b = append(b, `,"maxOutputBytes":`...)
	return strconv.AppendInt(b, lim.MaxOutputBytes, 10)
}

// appendNamespaces writes the "namespaces" member.
func appendNamespaces(b []byte, namespaces []protocol.Namespace) []byte {
	b = append(b, `,"namespaces":[`...)
	for i, ns := range namespaces {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendNamespace(b, ns)
	}
	return append(b, ']')
}

func appendNamespace(b []byte, ns protocol.Namespace) []byte {
	b = append(b, `{"global":`...)
	b = wireguard.AppendString(b, ns.Global)
	b = append(b, `,"names":[`...)
	for i, n := range ns.Names {
		if i > 0 {
			b = append(b, ',')
		}
		b = wireguard.AppendString(b, n)
	}
	b = append(b, ']')
	if ec := ns.ErrorClass; ec != nil {
		b = append(b, `,"errorClass":{"name":`...)
		b = wireguard.AppendString(b, ec.Name)
		b = append(b, `,"memberNameProperty":`...)
		b = wireguard.AppendString(b, ec.MemberNameProperty)
		if len(ec.Attributes) > 0 {
			b = appendAttributes(b, ec.Attributes)
		}
		b = append(b, '}')
	}
	if ns.Signatures != nil {
		b = appendSignatures(b, ns.Signatures)
	}
	return append(b, '}')
}

// appendAttributes writes an error class's "attributes" member, keys sorted.
func appendAttributes(b []byte, attrs map[string]string) []byte {
	b = append(b, `,"attributes":{`...)
	for i, k := range slices.Sorted(maps.Keys(attrs)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(wireguard.AppendString(b, k), ':')
		b = wireguard.AppendString(b, attrs[k])
	}
	return append(b, '}')
}

// appendSignatures writes a namespace's "signatures" member (docs/child-protocol.md
// §2.2): aligned with its names, null for an untyped function.
func appendSignatures(b []byte, sigs []*protocol.Signature) []byte {
	encs := make([][]byte, len(sigs))
	size := len(`,"signatures":[]`) + 5*len(sigs)
	for i, sig := range sigs {
		if sig != nil {
			encs[i] = encodedSignatures.of(sig)
			size += len(encs[i])
		}
	}
	b = append(slices.Grow(b, size), `,"signatures":[`...) // one allocation, not one per doubling
	for i, enc := range encs {
		if i > 0 {
			b = append(b, ',')
		}
		if enc == nil {
			enc = []byte("null")
		}
		b = append(b, enc...)
	}
	return append(b, ']')
}

// encodedSignatures remembers each signature's JSON: a signature is immutable
// and shared by every run declaring its function (the typed package's cache),
// and its doc and stub make it most of a typed boot frame (19 KB for 50
// functions), so a run copies it instead of escaping it again. Bounded: past
// maxEncodedSignatures it starts over.
var encodedSignatures = signatureCache{m: map[*protocol.Signature][]byte{}}

const maxEncodedSignatures = 4096

type signatureCache struct {
	mu sync.Mutex
	m  map[*protocol.Signature][]byte
}

func (c *signatureCache) of(sig *protocol.Signature) []byte {
	c.mu.Lock()
	enc, ok := c.m[sig]
	c.mu.Unlock()
	if ok {
		return enc
	}
	enc = appendSignature(nil, sig)
	c.mu.Lock()
	if len(c.m) >= maxEncodedSignatures {
		c.m = map[*protocol.Signature][]byte{}
	}
	c.m[sig] = enc
	c.mu.Unlock()
	return enc
}

// appendSignature writes one signature: {"params":[…],"doc":…,"stub":…} and
// "kwargs":true when it is set.
func appendSignature(b []byte, sig *protocol.Signature) []byte {
	b = append(b, `{"params":[`...)
	for j, p := range sig.Params {
		if j > 0 {
			b = append(b, ',')
		}
		b = wireguard.AppendString(append(b, `{"name":`...), p.Name)
		b = strconv.AppendBool(append(b, `,"required":`...), p.Required)
		if p.Default != nil {
			b = wireguard.AppendString(append(b, `,"default":`...), *p.Default)
		}
		b = append(b, '}')
	}
	b = wireguard.AppendString(append(b, `],"doc":`...), sig.Doc)
	b = wireguard.AppendString(append(b, `,"stub":`...), sig.Stub)
	if sig.Kwargs {
		b = append(b, `,"kwargs":true`...)
	}
	return append(b, '}')
}

// withBypassNote adds "egressNote", last, to b, a boot frame or a session's
// run frame: the text of a blocked direct connection (Manager.bypassNote);
// b unchanged for "".
func withBypassNote(b []byte, note string) []byte {
	if note == "" {
		return b
	}
	b = append(b[:len(b)-2], `,"egressNote":`...)
	return append(wireguard.AppendString(b, note), "}\n"...)
}

// withEnv adds an "env" member to a boot frame b: the NAME=value entries
// the child sets in its environment before any program runs (a run's
// secret placeholders).
func withEnv(b []byte, env []string) []byte {
	if len(env) == 0 {
		return b
	}
	b = append(b[:len(b)-2], `,"env":{`...)
	for i, kv := range env {
		if i > 0 {
			b = append(b, ',')
		}
		k, v, _ := strings.Cut(kv, "=")
		b = wireguard.AppendString(b, k)
		b = wireguard.AppendString(append(b, ':'), v)
	}
	return append(b, "}}\n"...)
}

// sessionBootFrame is the boot frame of a session child (docs/child-protocol.md
// §6.1): the session's budgets, its lifetime CPU total as cpuSeconds, no
// namespaces, and "session":true last.
func sessionBootFrame(lim protocol.Limits, lifetimeCPU int64, sysPath []string) []byte {
	lim.CPUSeconds = lifetimeCPU
	b := bootFrame(lim, nil, sysPath)
	return append(b[:len(b)-2], `,"session":true}`+"\n"...)
}

// sessionRunFrame is a run frame in a session (docs/child-protocol-sessions.md §6.2):
// the program, then the run's own budgets and bindings.
func sessionRunFrame(program string, lim protocol.Limits, namespaces []protocol.Namespace) []byte {
	b := runFrame(program)
	b = append(b[:len(b)-2], `,"cpuSeconds":`...)
	b = strconv.AppendInt(b, lim.CPUSeconds, 10)
	return append(appendNamespaces(appendOutputBudgets(b, lim), namespaces), "}\n"...)
}

// runFrame encodes the run frame carrying the program (WTF-8).
func runFrame(program string) []byte {
	b := make([]byte, 0, len(program)+32)
	b = append(b, `{"type":"run","program":`...)
	b = wireguard.AppendString(b, program)
	return append(b, "}\n"...)
}

// replyOK encodes {"type":"reply","id":N,"ok":true,"value":<canonical>}.
func replyOK(id int64, canonical []byte) []byte {
	b := make([]byte, 0, len(canonical)+48)
	b = append(b, `{"type":"reply","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"ok":true,"value":`...)
	b = append(b, canonical...)
	return append(b, "}\n"...)
}

// replyErr encodes {"type":"reply","id":N,"ok":false,"message":"…"}.
func replyErr(id int64, message string) []byte {
	b := make([]byte, 0, len(message)+56)
	b = append(b, `{"type":"reply","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"ok":false,"message":`...)
	b = wireguard.AppendString(b, message)
	return append(b, "}\n"...)
}

// replyHostErr is replyErr's frame with "exceptionType" after the message
// when the host named one of protocol.HostErrorTypes.
func replyHostErr(id int64, message, exceptionType string) []byte {
	b := replyErr(id, message)
	if exceptionType == "" {
		return b
	}
	b = append(b[:len(b)-2], `,"exceptionType":`...)
	return append(wireguard.AppendString(b, exceptionType), "}\n"...)
}

// replyTypeErr encodes a refused call's reply: replyErr's frame with
// "typeError":true after the message, so the child raises TypeError
// (docs/child-protocol-wire.md §2.2).
func replyTypeErr(id int64, message string) []byte {
	b := replyErr(id, message)
	return append(b[:len(b)-2], `,"typeError":true}`+"\n"...)
}

// judgeAnswer turns the client's answer into the reply frame (docs/child-protocol.md
// §2.9 table). A lossless result is then checked by check (nil for an
// untyped function): a mismatch returns no frame and the failing locations.
func judgeAnswer(id int64, a Answer, check protocol.Checker) ([]byte, error) {
	switch {
	case a.HasError && a.Message != nil:
		return replyHostErr(id, *a.Message, a.ErrorType), nil
	case a.HasError:
		return replyErr(id, protocol.UnrenderableReject), nil
	case a.HasResult:
		canonical, ok := wireguard.CheckClientResult(a.Result)
		if !ok {
			return replyErr(id, protocol.LosslessResolution), nil
		}
		if check != nil {
			if err := check.CheckResult(canonical); err != nil {
				return nil, err
			}
		}
		return replyOK(id, canonical), nil
	default:
		return replyErr(id, protocol.UnrenderableReject), nil
	}
}

// unknownBindingMessage builds the reply message for a call to an undeclared
// binding (docs/child-protocol-wire.md §2.9): target = global[:cap] + "." + name[:cap] (cut at character
// boundaries), preview = the JSON-quoted first 1024 characters of the target,
// and the whole message capped by capMessage.
func unknownBindingMessage(global, name string, capBytes int64) string {
	target := previewTarget(cutBytes(global, capBytes), cutBytes(name, capBytes), protocol.UnknownBindingPreview)
	msg := append([]byte("unknown binding "), wireguard.AppendString(nil, target)...)
	return wireguard.CapMessage(string(msg), capBytes)
}

// previewTarget is the first max characters of g + "." + n, without building
// the (possibly huge) concatenation.
func previewTarget(g, n string, max int) string {
	out := make([]byte, 0, 64)
	chars := 0
	for _, part := range [...]string{g, ".", n} {
		i := 0
		for i < len(part) && chars < max {
			i += charLen(part, i)
			chars++
		}
		out = append(out, part[:min(i, len(part))]...)
		if chars >= max {
			break
		}
	}
	return string(out)
}

// cutBytes cuts s to at most capBytes bytes at a character boundary (WTF-8:
// a lone surrogate is one 3-byte character).
func cutBytes(s string, capBytes int64) string {
	if capBytes < 0 {
		capBytes = 0
	}
	if int64(len(s)) <= capBytes {
		return s
	}
	i := int(capBytes)
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i]
}

// charLen is the byte length of the (WTF-8) character starting at s[i].
func charLen(s string, i int) int {
	switch c := s[i]; {
	case c < 0x80:
		return 1
	case c >= 0xF0:
		return 4
	case c >= 0xE0:
		return 3
	case c >= 0xC0:
		return 2
	default:
		return 1 // stray continuation byte: not produced by the decoder
	}
}

// Classification messages (docs/child-protocol-daemon.md §4.8).
func cpuTimeout(cpuSeconds int64) *protocol.RunError {
	return &protocol.RunError{
		Kind: protocol.KindTimeout,
		Message: "CPU time exhausted (limit at most " + strconv.FormatInt(cpuSeconds, 10) +
			"s; a stricter inherited RLIMIT_CPU can fire sooner)",
		Budget: protocol.BudgetCPU,
	}
}

// lifetimeTimeout is a session run's end at the session's lifetime CPU
// total (shared by a sandboxed session and its forks).
func lifetimeTimeout(seconds int64) *protocol.RunError {
	return &protocol.RunError{
		Kind: protocol.KindTimeout,
		Message: "the session's lifetime CPU time is used up (CODERUN_SESSION_CPU_SECONDS=" +
			strconv.FormatInt(seconds, 10) + ", shared with its forks in tier sandbox)",
		Budget: protocol.BudgetCPU,
	}
}

func wallTimeout(maxWallMs int64) *protocol.RunError {
	return &protocol.RunError{
		Kind:    protocol.KindTimeout,
		Message: "wall-clock ceiling reached (" + strconv.FormatInt(maxWallMs, 10) + "ms)",
		Budget:  protocol.BudgetWall,
	}
}

func workerExit(msg string) *protocol.RunError {
	return &protocol.RunError{Kind: protocol.KindWorkerExit, Message: msg}
}

func abortError(msg string) *protocol.RunError {
	return &protocol.RunError{Kind: protocol.KindAbort, Message: msg}
}

// exitedEarly is the worker-exit of a child that died before a decision.
func exitedEarly(code int, signal string, signaled bool) *protocol.RunError {
	e := workerExit("")
	if signaled {
		e.Message = "python exited (code=null, signal=" + signal + ") before completing"
		e.Signal = signal
		return e
	}
	c := code
	e.Message = "python exited (code=" + strconv.Itoa(code) + ", signal=null) before completing"
	e.ExitCode = &c
	return e
}
