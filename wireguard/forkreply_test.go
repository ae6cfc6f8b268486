package wireguard

import (
	"math"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

func TestDecodeForkReply(t *testing.T) {
	for _, c := range []struct {
		line string
		want ForkReply
		ok   bool
	}{
		{`{"type":"forked","pid":4242}`, ForkReply{Forked: true, Pid: 4242}, true},
		{`{"type":"forked","pid":4242.0,"extra":1}`, ForkReply{Forked: true, Pid: 4242}, true},
		{`{"type":"fork-failed","message":"no memory"}`, ForkReply{Message: "no memory"}, true},
		{`{"type":"forked","pid":0}`, ForkReply{}, false},
		{`{"type":"forked","pid":-1}`, ForkReply{}, false},
		{`{"type":"forked","pid":1.5}`, ForkReply{}, false},
		{`{"type":"forked","pid":2147483648}`, ForkReply{}, false},
		{`{"type":"forked","pid":"12"}`, ForkReply{}, false},
		{`{"type":"forked"}`, ForkReply{}, false},
		{`{"type":"forked","pid":1,"pid":2}`, ForkReply{}, false},
		{`{"type":"fork-failed"}`, ForkReply{}, false},
		{`{"type":"done"}`, ForkReply{}, false},
		{`{"type":"forked","pid":12`, ForkReply{}, false},
	} {
		got, ok := DecodeForkReply([]byte(c.line))
		if ok != c.ok || ok && got != c.want {
			t.Errorf("%s: got %+v %v, want %+v %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// FuzzDecodeForkReply: never panics; an accepted reply is a forked one with a
// pid from 1 to 2^31−1 and no message, or a fork-failed one with no pid and a
// message of at most protocol.NameCut code points; the line was one strict
// JSON object.
func FuzzDecodeForkReply(f *testing.F) {
	for _, line := range []string{`{"type":"forked","pid":4242}`, `{"type":"forked","pid":1e3}`,
		`{"type":"fork-failed","message":"OSError: [Errno 12]"}`, `{"type":"forked","pid":-0}`,
		`{"type":"fork-failed","message":"\ud800"}`, `{"type":"forked","pid":1,"pid":2}`, `[]`} {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, ok := DecodeForkReply(line)
		if !ok {
			return
		}
		if !Valid(line, Strict) {
			t.Fatalf("accepted invalid JSON %q", line)
		}
		if r.Forked && (r.Pid < 1 || r.Pid > math.MaxInt32 || r.Message != "") ||
			!r.Forked && (r.Pid != 0 || cutChars(r.Message, protocol.NameCut) != r.Message) {
			t.Fatalf("%q accepted as %+v", line, r)
		}
	})
}
