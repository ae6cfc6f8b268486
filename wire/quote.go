package wire

import (
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// appendString writes a WTF-8 Go string as a JSON string with the rules of
// docs/child-protocol-wire.md §2.7 (non-ASCII raw, lone surrogates as \udxxx).
func appendString(dst []byte, s string) []byte { return wireguard.AppendString(dst, s) }

// quote is appendString into a fresh string (for messages: `<g>`, `<f>` …).
func quote(s string) string { return string(appendString(nil, s)) }

// appendInteger writes a number in the canonical spelling of docs/child-protocol-wire.md §2.7.
func appendInteger(dst []byte, f float64) []byte { return wireguard.AppendNumber(dst, f) }
