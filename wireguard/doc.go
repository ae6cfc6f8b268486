// Package wireguard guards the fd-3 wire between the daemon and its hostile Python
// child (CHILD-CONTRACT §2.4–§2.7, §4.5, §4.7): bounded JSON-lines framing, strict
// frame decoding and rebuild, the lossless JSON scanner/meter/canonical encoder, the
// log ledger with stray-output capture, and the message cap.
//
// Everything here is a pure function over bytes (Capture is a pure state machine fed
// by the caller) and uses only the standard library and package protocol. Nothing in
// this package recurses over input nesting: the JSON scanner is an explicit state
// machine with a heap stack, so a 100 000-deep value costs memory, not goroutine
// stack. encoding/json is deliberately not used (CHILD-CONTRACT Appendix B item 4).
//
// Strings that may carry program text are WTF-8: valid UTF-8 except that a lone
// surrogate U+D800..U+DFFF is held as its 3-byte generalized UTF-8 form (ED A0 80 …).
package wireguard
