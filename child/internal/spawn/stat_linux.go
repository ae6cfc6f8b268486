//go:build linux

package spawn

import (
	"bytes"
	"os"
	"strconv"
)

// StartTime returns the start time of pid in clock ticks since boot
// (/proc/<pid>/stat field 22), or false when the process does not exist (a
// zombie still has one) or the file cannot be read or parsed.
func StartTime(pid int) (uint64, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStartTime(b)
}

// parseStartTime extracts field 22 from a /proc/<pid>/stat line. The command
// name (field 2) is parenthesised and may itself contain spaces and
// parentheses, so fields are counted after the LAST ')'.
func parseStartTime(stat []byte) (uint64, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(stat[i+1:])
	const index = 22 - 3 // fields[0] is field 3 (state)
	if len(fields) <= index {
		return 0, false
	}
	v, err := strconv.ParseUint(string(fields[index]), 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// Decimal parses s as a decimal number: digits only (no sign, no space, no
// empty string), at most 2^64-1.
func Decimal(s string) (uint64, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
