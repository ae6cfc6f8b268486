package wire

import (
	"strconv"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// Bounds of run.files beyond maxFileBytes (docs/protocol-files.md §12.1): a path
// must be one the kernel can open, and the entries few enough to write
// before the program starts.
const (
	maxFiles        = 10000
	maxPathBytes    = 4095 // PATH_MAX − 1
	maxSegmentBytes = 255  // NAME_MAX
)

// validateFiles checks run.files (docs/protocol-files.md §12.1) against the
// effective maxFileBytes: each entry's path and its one payload, then the
// total decoded size, counted as it goes so a large request stops early.
func validateFiles(m *wireguard.Member, maxFileBytes int64) ([]protocol.InputFile, error) {
	if !given(m) {
		return nil, nil
	}
	elems, ok := wireguard.ValidElements(m.Value)
	switch {
	case !ok:
		return nil, reject("files must be an array of {path, text | base64}")
	case len(elems) > maxFiles:
		return nil, reject("files has " + strconv.Itoa(len(elems)) + " entries; at most " + strconv.Itoa(maxFiles) + " are allowed")
	}
	out := make([]protocol.InputFile, 0, len(elems))
	seen := newPathSet()
	var total int64
	for i, el := range elems {
		f, asSent, err := inputFile("files["+strconv.Itoa(i)+"]", el)
		if err != nil {
			return nil, err
		}
		if err := seen.add(i, f.Path, asSent); err != nil {
			return nil, err
		}
		if total += int64(len(f.Data)); total > maxFileBytes {
			return nil, reject("files: the decoded size exceeds maxFileBytes " + strconv.FormatInt(maxFileBytes, 10) +
				" (at files[" + strconv.Itoa(i) + "], " + strconv.FormatInt(total, 10) + " bytes so far)")
		}
		out = append(out, f)
	}
	return out, nil
}

// inputFile reads one entry, {path, text} or {path, base64}, and returns its
// path as sent too (for messages).
func inputFile(at string, raw []byte) (protocol.InputFile, string, error) {
	var f protocol.InputFile
	ms, ok := wireguard.ValidMembers(raw)
	if !ok {
		return f, "", reject(at + " must be an object {path, text | base64}")
	}
	given := lastOf(ms, "path", "text", "base64")
	p, ok := wireguard.DecodeString(value(given[0]))
	if !ok {
		return f, "", reject(at + ".path must be a string")
	}
	if f.Path, ok = cleanPath(p); !ok {
		return f, p, reject(at + ".path " + quote(p) + " " + pathProblem(p))
	}
	var err error
	f.Data, err = payload(at, given[1], given[2])
	return f, p, err
}

// payload decodes an entry's one payload: its text as UTF-8, or its base64,
// strict.
func payload(at string, textm, b64m *wireguard.Member) ([]byte, error) {
	hasText, hasB64 := given(textm), given(b64m)
	text, b64 := value(textm), value(b64m)
	switch {
	case hasText == hasB64:
		return nil, reject(at + " must have exactly one of text and base64")
	case hasText:
		s, ok := wireguard.DecodeString(text)
		if !ok {
			return nil, reject(at + ".text must be a string")
		}
		return []byte(s), nil
	}
	if wireguard.KindOf(b64) != wireguard.KindString {
		return nil, reject(at + ".base64 must be a string")
	}
	data, err := wireguard.DecodeBase64(b64)
	if err != nil {
		return nil, reject(at + ".base64 is not valid base64 (" + err.Error() + ")")
	}
	return data, nil
}

// cleanPath returns p without empty and "." segments, or false when p is not
// a usable relative file path (pathProblem says why).
func cleanPath(p string) (string, bool) {
	if pathProblem(p) != "" {
		return "", false
	}
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			segs = append(segs, s)
		}
	}
	return strings.Join(segs, "/"), true
}

// pathProblem names what is wrong with a files path, or "".
func pathProblem(p string) string {
	segs := strings.Split(p, "/")
	var kept []string
	for _, s := range segs {
		switch {
		case s == "..":
			return "must not contain a '..' segment"
		case len(s) > maxSegmentBytes:
			return "has a segment longer than " + strconv.Itoa(maxSegmentBytes) + " bytes"
		case s != "" && s != ".":
			kept = append(kept, s)
		}
	}
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return "must not contain NUL"
	case strings.HasPrefix(p, "/"):
		return "must be relative to the working directory, not absolute"
	case len(p) > maxPathBytes:
		return "is longer than " + strconv.Itoa(maxPathBytes) + " bytes"
	case len(kept) == 0 || strings.HasSuffix(p, "/"):
		return "must name a file"
	case kept[0] == protocol.OutDir:
		return "must not be under out/ (the run's output folder)"
	}
	return ""
}

// pathSet finds two entries naming the same file, or a file that another
// entry needs as a folder.
type pathSet struct {
	files map[string]int // path → entry index
	dirs  map[string]int // parent folder → the first entry under it
}

func newPathSet() *pathSet { return &pathSet{files: map[string]int{}, dirs: map[string]int{}} }

func (s *pathSet) add(i int, p, asSent string) error {
	at := "files[" + strconv.Itoa(i) + "].path " + quote(asSent)
	if j, ok := s.files[p]; ok {
		return reject(at + " repeats files[" + strconv.Itoa(j) + "].path")
	}
	if j, ok := s.dirs[p]; ok {
		return reject(at + " is a folder of files[" + strconv.Itoa(j) + "].path")
	}
	for k := strings.IndexByte(p, '/'); k >= 0; k = next(p, k) {
		dir := p[:k]
		if j, ok := s.files[dir]; ok {
			return reject(at + " needs files[" + strconv.Itoa(j) + "].path as a folder")
		}
		if _, ok := s.dirs[dir]; !ok {
			s.dirs[dir] = i
		}
	}
	s.files[p] = i
	return nil
}

// next is the index of the next '/' in p after k, or -1.
func next(p string, k int) int {
	if j := strings.IndexByte(p[k+1:], '/'); j >= 0 {
		return k + 1 + j
	}
	return -1
}
