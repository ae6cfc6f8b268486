// Package wireguard guards the daemon's JSON: the fd-3 wire between the daemon and its
// hostile Python child (docs/child-protocol-wire.md §2.4–docs/child-protocol-wire.md §2.7, docs/child-protocol-daemon.md §4.5, docs/child-protocol-daemon.md §4.7) and, through the same
// scanner, the client's JSON-RPC messages. It owns bounded JSON-lines framing, strict
// frame decoding and rebuild, the one JSON scanner of the module (Strict and Lax modes,
// see Mode) with its entry points for whole values (Members, Elements, Valid,
// DecodeString), the lossless meter and canonical encoder, the log ledger with
// stray-output capture, and the message cap.
//
// Everything here is a pure function over bytes (Capture is a pure state machine fed
// by the caller) and uses only the standard library, package protocol and, for base64
// payloads, github.com/segmentio/asm/base64 (base64.go). Nothing in
// this package recurses over input nesting: the JSON scanner is an explicit state
// machine with a heap stack, so a 100 000-deep value costs memory, not goroutine
// stack.
//
// # Why not encoding/json or jsontext
//
// Neither encoding/json nor encoding/json/jsontext (GOEXPERIMENT=jsonv2; the standard
// library's import of github.com/go-json-experiment/json) can read or write this JSON
// (docs/child-protocol.md Appendix B item 4). The jsontext behaviours below were observed with
// Go 1.26.8 under GOEXPERIMENT=jsonv2 (Decoder.ReadValue and ReadToken, default
// options unless named):
//
//   - Depth. encoding/json refuses nesting deeper than 10 000 levels (Unmarshal, Valid,
//     and the compaction Marshal applies to a json.RawMessage); jsontext fails with
//     "exceeded max depth" at 10 001. A program may return, and a binding may answer
//     with, a value nested far deeper, and a JSON-RPC envelope adds levels.
//   - Lone surrogates. "\ud800" is a legal JSON escape and a legal Python string; it
//     must reach the other side as "\ud800". encoding/json decodes it to U+FFFD;
//     jsontext rejects it ("invalid surrogate pair"), and with AllowInvalidUTF8 keeps
//     the raw value but decodes the string to U+FFFD. Here a decoded string is WTF-8
//     (below) and re-encodes to the same escape.
//   - Member order and repeated names. The protocol keeps a value's members in order,
//     repeats included, as program data (docs/child-protocol-wire.md §2.7); it reads a client's message with the
//     last of a repeated name winning (JSON.parse); and it drops a frame that repeats
//     a field it reads (DecodeFrame). encoding/json merges repeats into a map or the
//     last field and loses order; jsontext refuses any repeat (ErrDuplicateName)
//     unless AllowDuplicateNames, and then leaves every policy to the caller anyway.
//   - Exact integers. encoding/json decodes numbers to float64 (UseNumber only keeps
//     the text); neither package says whether a double holds an integer token exactly,
//     nor spells a number the ECMAScript way. The scanner keeps number text raw and
//     numberVerdict judges it.
//   - Invalid UTF-8. encoding/json replaces it with U+FFFD silently; jsontext rejects
//     it or, with AllowInvalidUTF8, replaces it. The daemon must tell a client "not
//     valid UTF-8" apart from "not valid JSON", and must let a binding's lossy result
//     reach its verdict (Lax mode).
//   - Bounded allocation on hostile input. CheckValue meters a value's canonical size
//     in one pass and stops at the budget before allocating anything proportional to
//     the input; Unmarshal builds the whole tree first, and jsontext's decoder buffers
//     the whole value and keeps a set of every object's names for the repeat check.
//
// Strings that may carry program text are WTF-8: valid UTF-8 except that a lone
// surrogate U+D800..U+DFFF is held as its 3-byte generalized UTF-8 form (ED A0 80 …).
package wireguard
