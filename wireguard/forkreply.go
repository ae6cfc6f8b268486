package wireguard

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// ForkReply is the first frame on a fork's new channel, rebuilt
// (docs/child-protocol-sessions.md §6.4): either forked with the fork's pid, or
// fork-failed with the source's message.
type ForkReply struct {
	Forked  bool   // true: type forked; false: type fork-failed
	Pid     int    // forked: a positive pid
	Message string // fork-failed: WTF-8, cut to protocol.NameCut code points
}

// Members of a fork reply, index-aligned with forkReplyNames.
const (
	fType = iota
	fPid
	fMessage
	fCount
)

var forkReplyNames = []string{"type", "pid", "message"}

// DecodeForkReply decodes a fork's reply frame under the same strictness as
// DecodeFrame (one object, strict UTF-8, no repeated member it reads). A
// forked frame needs an integral pid from 1 to 2^31−1; a fork-failed frame a
// string message. ok=false means the line is junk, which the caller treats as
// a failed fork: the frame is written by the fork itself, on a channel a
// program can reach, so the pid it names is validated again by the reaper.
func DecodeForkReply(line []byte) (ForkReply, bool) {
	var m [fCount]rawMember
	if !frameMembers(line, forkReplyNames, m[:]) || m[fType].kind != tokString {
		return ForkReply{}, false
	}
	switch decodeTokenString(m[fType].value) {
	case protocol.FrameForked:
		pid, ok := errorLine(m[fPid]) // the same range as a line: 1 to 2^31−1
		return ForkReply{Forked: true, Pid: int(pid)}, ok
	case protocol.FrameForkFailed:
		if m[fMessage].kind != tokString {
			return ForkReply{}, false
		}
		return ForkReply{Message: cutChars(decodeTokenString(m[fMessage].value), protocol.NameCut)}, true
	}
	return ForkReply{}, false
}
