package wireguard

import (
	"bytes"
	"strings"
)

// The splitters below are for text a Strict or Lax scan has already
// accepted (a value carved out of a validated message, so with no whitespace
// around it): its extent is found by tracking strings and brackets only, so
// a caller walking a large document level by level does not validate it
// again at every level (rpc's run params: 50 typed declarations are ~25 KB).
// On text that was not validated their result is undefined.

// ValidMembers is Members for already-validated text: its members when it
// is an object, ok false when it is not.
func ValidMembers(raw []byte) (ms []Member, ok bool) {
	if KindOf(raw) != KindObject {
		return nil, false
	}
	ms = []Member{}
	for i := validSkipSpace(raw, 1); raw[i] != '}'; {
		nameEnd := validStringEnd(raw, i)
		name, _ := DecodeString(raw[i:nameEnd])
		start := validSkipSpace(raw, validSkipSpace(raw, nameEnd)+1) // past the ':'
		end := validValueEnd(raw, start)
		ms = append(ms, Member{Name: name, Value: raw[start:end]})
		i = validNextItem(raw, end)
	}
	return ms, true
}

// ValidElements is Elements for already-validated text.
func ValidElements(raw []byte) (elems [][]byte, ok bool) {
	if KindOf(raw) != KindArray {
		return nil, false
	}
	elems = [][]byte{}
	for i := validSkipSpace(raw, 1); raw[i] != ']'; {
		end := validValueEnd(raw, i)
		elems = append(elems, raw[i:end])
		i = validNextItem(raw, end)
	}
	return elems, true
}

// validNextItem is the offset of the member or element after the one ending at
// i, or of the container's closing bracket.
func validNextItem(raw []byte, i int) int {
	if i = validSkipSpace(raw, i); raw[i] == ',' {
		return validSkipSpace(raw, i+1)
	}
	return i
}

func validSkipSpace(raw []byte, i int) int {
	for raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r' {
		i++
	}
	return i
}

// validValueEnd is the end offset of the valid value starting at i.
func validValueEnd(raw []byte, i int) int {
	switch raw[i] {
	case '"':
		return validStringEnd(raw, i)
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch raw[j] {
			case '"':
				j = validStringEnd(raw, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i // a number or a literal: up to the delimiter after it
	for j < len(raw) && !strings.ContainsRune(",]} \t\n\r", rune(raw[j])) {
		j++
	}
	return j
}

// validStringEnd is the end offset of the string whose opening quote is at i:
// just past the first quote after it that an even run of backslashes precedes
// (an odd run escapes it; \uXXXX has no quote to mistake). Quotes are found
// with bytes.IndexByte, so a megabyte of base64 is crossed at memchr speed.
func validStringEnd(raw []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(raw[j:], '"')
		if k < 0 {
			return len(raw) // not validated text: undefined, but no overrun
		}
		k += j
		run := 0
		for k-1-run > i && raw[k-1-run] == '\\' {
			run++
		}
		if run%2 == 0 {
			return k + 1
		}
		j = k + 1
	}
}
