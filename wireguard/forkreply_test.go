package wireguard

import "testing"

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
