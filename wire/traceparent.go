package wire

import (
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// optionalTraceparent validates run's "traceparent" when present and not
// null: a W3C trace context traceparent, version 00 form
// (docs/service.md §7).
func optionalTraceparent(m *wireguard.Member) (string, error) {
	if !given(m) {
		return "", nil
	}
	s, ok := wireguard.DecodeString(m.Value)
	if !ok || !validTraceparent(s) {
		return "", reject("traceparent must be a W3C traceparent string: 2 hex digits of version (not ff), " +
			"32 of trace id and 16 of parent id (neither all zero), 2 of flags, joined by '-'")
	}
	return s, nil
}

// validTraceparent checks the 55-character form every version shares;
// a later version may append fields after a '-'.
func validTraceparent(s string) bool {
	if len(s) < 55 || (len(s) > 55 && s[55] != '-') || s[:2] == "ff" || s[0:2] == "00" && len(s) != 55 {
		return false
	}
	for _, f := range [][2]int{{0, 2}, {3, 35}, {36, 52}, {53, 55}} {
		if !lowerHex(s[f[0]:f[1]]) {
			return false
		}
	}
	return s[2] == '-' && s[35] == '-' && s[52] == '-' && !allZero(s[3:35]) && !allZero(s[36:52])
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
