package wireguard

import "github.com/coderun-rpc/coderun-rpc/protocol"

// CapMessage caps a diagnostic message at cap bytes of UTF-8, the 15-byte marker
// "… [truncated]" included (docs/child-protocol-daemon.md §4.7). A message of at most cap bytes is returned
// unchanged; otherwise it is cut at max(0, cap−15) bytes, backed up to the start of
// the character the cut landed in (a WTF-8 lone surrogate is a 3-byte character, so
// it is never split), and the marker is appended. For cap < 15 the result is exactly
// the marker.
func CapMessage(msg string, cap int64) string {
	if int64(len(msg)) <= cap {
		return msg
	}
	cut := int(max(0, cap-int64(len(protocol.MessageMarker))))
	return msg[:charStart(msg, cut)] + protocol.MessageMarker
}

// charStart backs i up to the first byte of the (generalized) UTF-8 sequence that
// covers it: a lead byte at most three bytes before i whose sequence reaches past i.
func charStart(s string, i int) int {
	if i >= len(s) || s[i]&0xC0 != 0x80 { // the cut is already at a character start
		return i
	}
	for k := 1; k <= 3 && i-k >= 0; k++ {
		if s[i-k]&0xC0 != 0x80 { // a lead byte (or ASCII)
			if seqLen(s[i-k]) > k {
				return i - k
			}
			return i
		}
	}
	return i
}

// seqLen is the sequence length a (generalized) UTF-8 lead byte announces; 1 for
// ASCII and for bytes that cannot start a sequence.
func seqLen(b byte) int {
	switch {
	case b >= 0xF0 && b <= 0xF4:
		return 4
	case b >= 0xE0 && b <= 0xEF:
		return 3
	case b >= 0xC2 && b <= 0xDF:
		return 2
	}
	return 1
}
