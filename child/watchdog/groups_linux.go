//go:build linux

package watchdog

import (
	"bytes"
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"golang.org/x/sys/unix"
)

// What the daemon and its watchdog share: the set of watched process groups
// and the records that keep the watchdog's copy of it up to date.

// pidMaxLimit is the kernel's ceiling for pid_max (PID_MAX_LIMIT on 64-bit):
// no process group id is larger.
const pidMaxLimit = 1 << 22

// validPgid reports whether pgid can name one process group. 0 and 1 never
// may: kill(-0) would signal the caller's own group and kill(-1) every
// process it may signal.
func validPgid(pgid int) bool { return pgid > 1 && pgid <= pidMaxLimit }

// groupSet maps each watched process group id to its leader's start time
// (/proc/<pgid>/stat field 22 when the group was registered), the guard
// against a recycled id.
type groupSet map[int]uint64

// leader is the group's registration as a Process, so the group calls share
// Process's pid-reuse and validity checks.
func (s groupSet) leader(pgid int) *spawn.Process { return spawn.Leader(pgid, s[pgid]) }

// prune forgets every group that is gone (spawn.GroupGone).
func (s groupSet) prune() {
	for pgid := range s {
		if spawn.GroupGone(s.leader(pgid)) {
			delete(s, pgid)
		}
	}
}

// kill prunes, SIGKILLs every group left and reports how many it signalled.
func (s groupSet) kill() int {
	s.prune()
	for pgid := range s {
		s.leader(pgid).SignalGroup(unix.SIGKILL)
	}
	return len(s)
}

// A record is one line on the watchdog's stdin: "w <pgid> <start>\n"
// (watch the group, whose leader has that start time), "u <pgid>\n" (unwatch
// it), "d <path>\n" (remove the directory when the daemon dies) or
// "f <path>\n" (forget it: removed). Numbers are decimal, a path is quoted as
// strconv.Quote does (so it holds no newline), fields are separated by single
// spaces, and nothing else is accepted. The daemon writes records under a
// mutex, one write each, so they never interleave.
type record struct {
	watch bool   // w or d; u or f otherwise
	pgid  int    // a group's record
	start uint64 // w only
	dir   string // a directory's record when not empty: a valid dir (validDir)
}

// maxPathLen is the longest directory path registered (PATH_MAX).
const maxPathLen = 4096

// maxRecordLen bounds a line the watchdog accepts, newline included: a
// quoted path is at most four times as long as the path.
const maxRecordLen = 4*maxPathLen + 8

func (r record) appendTo(b []byte) []byte {
	switch {
	case r.dir != "" && r.watch:
		b = strconv.AppendQuote(append(b, "d "...), r.dir)
	case r.dir != "":
		b = strconv.AppendQuote(append(b, "f "...), r.dir)
	case r.watch:
		b = strconv.AppendInt(append(b, "w "...), int64(r.pgid), 10)
		b = strconv.AppendUint(append(b, ' '), r.start, 10)
	default:
		b = strconv.AppendInt(append(b, "u "...), int64(r.pgid), 10)
	}
	return append(b, '\n')
}

// parseRecord decodes one line (with its newline). ok is false for anything
// but a well-formed record with a valid group id or directory.
func parseRecord(line []byte) (r record, ok bool) {
	body, found := bytes.CutSuffix(line, []byte{'\n'})
	if !found || len(line) > maxRecordLen {
		return record{}, false
	}
	if op, quoted, found := bytes.Cut(body, []byte{' '}); found && (string(op) == "d" || string(op) == "f") {
		dir, err := strconv.Unquote(string(quoted))
		if err != nil || !validDir(dir) {
			return record{}, false
		}
		return record{watch: string(op) == "d", dir: dir}, true
	}
	fields := bytes.Split(body, []byte{' '})
	switch {
	case len(fields) == 3 && string(fields[0]) == "w":
		r.watch = true
		if r.start, ok = spawn.Decimal(string(fields[2])); !ok {
			return record{}, false
		}
	case len(fields) == 2 && string(fields[0]) == "u":
	default:
		return record{}, false
	}
	pgid, ok := spawn.Decimal(string(fields[1]))
	if !ok || !validPgid(int(min(pgid, pidMaxLimit+1))) {
		return record{}, false
	}
	r.pgid = int(pgid)
	return r, true
}
