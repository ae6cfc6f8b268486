package wireguard

import (
	"reflect"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

func strp(s string) *string { return &s }
func intp(n int64) *int64   { return &n }

func decodeOK(t *testing.T, line string) Frame {
	t.Helper()
	f, ok := DecodeFrame([]byte(line))
	if !ok {
		t.Fatalf("%s dropped", line)
	}
	return f
}

// C196–C205: frames that are rebuilt, with their exact rebuilt form.
func TestDecodeFrameRebuilds(t *testing.T) {
	doneErr := func(kind, msg string, et *string, line *int64) Frame {
		return Frame{Type: "done", Error: &protocol.DoneErrorField{Kind: kind, Message: msg, ExceptionType: et, Line: line}}
	}
	for _, c := range []struct {
		line string
		want Frame
	}{
		{`{"type":"boot-ack","extra":"x"}`, Frame{Type: "boot-ack"}}, // C196
		{`{"type":"log","text":"a"}`, Frame{Type: "log", Text: "a"}},
		{`{"type":"log","text":"a","open":true}`, Frame{Type: "log", Text: "a", Open: true}},
		{`{"type":"log","text":"m","truncated":true}`, Frame{Type: "log", Text: "m", Truncated: true}},
		{`{"type":"log","text":"a","open":1,"truncated":1}`, Frame{Type: "log", Text: "a"}}, // C198
		{`{"type":"log","text":"a","open":"yes","truncated":"yes"}`, Frame{Type: "log", Text: "a"}},
		{`{"type":"log","text":"a","open":false,"truncated":false}`, Frame{Type: "log", Text: "a"}},
		{`{"type":"log","text":"\ud800\ud83d\ude00"}`, Frame{Type: "log", Text: "\xed\xa0\x80😀"}},
		{`{"type":"call","id":0,"global":"t","name":"n","args":null}`, // C199, C204
			Frame{Type: "call", ID: 0, Global: "t", Name: "n", Args: []byte("null")}},
		{`{"type":"call","id":7,"global":"t","name":"n","args":[0, 1.5]}`, // C203
			Frame{Type: "call", ID: 7, Global: "t", Name: "n", Args: []byte("[0,1.5]")}},
		{`{"type":"call","id":1.5,"global":"\u0074","name":"my-tool","args":{"a":1,"a":2.0}}`,
			Frame{Type: "call", ID: 1.5, Global: "t", Name: "my-tool", Args: []byte(`{"a":1,"a":2}`)}},
		{`{"type":"done"}`, Frame{Type: "done"}}, // C200
		{`{"type":"done","value":42}`, Frame{Type: "done", HasValue: true, Value: []byte("42")}},
		{`{"type":"done","value":null}`, Frame{Type: "done", HasValue: true, Value: []byte("null")}},
		{`{"type": "done", "value": [ 1e400, {"x": -0} ] }`, // C205: unchecked, as received
			Frame{Type: "done", HasValue: true, Value: []byte(`[ 1e400, {"x": -0} ]`)}},
		{`{"type":"done","error":{"kind":"exception","message":"m"}}`, doneErr("exception", "m", nil, nil)},
		{`{"type":"done","error":{"kind":"invalid-output","message":"m"}}`, doneErr("invalid-output", "m", nil, nil)},
		{`{"type":"done","error":{"kind":"output-limit","message":""}}`, doneErr("output-limit", "", nil, nil)},
		{`{"type":"done","value":1,"error":{"kind":"exception","message":"m"}}`,
			Frame{Type: "done", HasValue: true, Value: []byte("1"), Error: &protocol.DoneErrorField{Kind: "exception", Message: "m"}}},
		{`{"type":"done","error":{"kind":"exception","message":"m","exceptionType":"ValueError","line":3}}`,
			doneErr("exception", "m", strp("ValueError"), intp(3))},
		{`{"type":"done","error":{"kind":"exception","message":"m","exceptionType":7,"line":0}}`,
			doneErr("exception", "m", nil, nil)},
		{`{"type":"done","error":{"kind":"exception","message":"m","line":1.5}}`, doneErr("exception", "m", nil, nil)},
		{`{"type":"done","error":{"kind":"exception","message":"m","line":2147483648}}`, doneErr("exception", "m", nil, nil)},
		{`{"type":"done","error":{"kind":"exception","message":"m","line":2147483647}}`, doneErr("exception", "m", nil, intp(2147483647))},
		{`{"type":"done","error":{"kind":"exception","message":"m","line":3.0}}`, doneErr("exception", "m", nil, intp(3))},
		{`{"type":"done","error":{"kind":"output-limit","message":"m","exceptionType":"E","line":3}}`,
			doneErr("output-limit", "m", nil, nil)},
		{`{"type":"done","error":{"kind":"exception","message":"m","exceptionType":"` + strings.Repeat("é", 250) + `"}}`,
			doneErr("exception", "m", strp(strings.Repeat("é", 200)), nil)},
		{`{"type":"done","error":{"kind":"invalid-output","message":"m","path":"$[1]","hint":"h"}}`,
			Frame{Type: "done", Error: &protocol.DoneErrorField{Kind: "invalid-output", Message: "m", Path: strp("$[1]"), Hint: strp("h")}}},
		{`{"type":"done","error":{"kind":"invalid-output","message":"m","path":1,"hint":null}}`, doneErr("invalid-output", "m", nil, nil)},
		{`{"type":"done","error":{"kind":"exception","message":"m","path":"$","hint":"h"}}`, doneErr("exception", "m", nil, nil)},
		{`{"type":"done","error":{"kind":"invalid-output","message":"m","path":"` + strings.Repeat("é", 700) + `","hint":"` + strings.Repeat("x", 300) + `"}}`,
			Frame{Type: "done", Error: &protocol.DoneErrorField{Kind: "invalid-output", Message: "m",
				Path: strp(strings.Repeat("é", 600)), Hint: strp(strings.Repeat("x", 200))}}},
		{`{"type":"log","text":"a","x":1,"x":2}`, Frame{Type: "log", Text: "a"}}, // repeats of unread names are ignored
		{` {"type":"boot-ack"} `, Frame{Type: "boot-ack"}},
		{`{"type":"log","text":"\"9007199254740993"}`, Frame{Type: "log", Text: `"9007199254740993`}}, // C209
		{`{"type":"log","text":"a","n":[9007199254740992,18446744073709551616,9007199254740993.0,9e99]}`,
			Frame{Type: "log", Text: "a"}},
	} {
		if got := decodeOK(t, c.line); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s\n got %+v\nwant %+v", c.line, got, c.want)
		}
	}
}

// C197, C199, C201–C204, C209 and docs/child-protocol-wire.md §2.4 step 3: frames that are dropped.
func TestDecodeFrameDrops(t *testing.T) {
	for _, line := range []string{
		`{"type":"log","text":42}`, // C197
		`{"type":"log"}`,
		`{"type":"call","id":0,"global":"t","name":"n"}`, // C199
		`{"type":"call","id":"1","global":"t","name":"n","args":1}`,
		`{"type":"call","id":1,"global":7,"name":"n","args":1}`,
		`{"type":"call","id":1,"global":"t","args":1}`,
		`{"type":"call","id":1,"global":"t","name":"n","args":{"n":1e400}}`, // C203
		`{"type":"call","id":1e400,"global":"t","name":"n","args":1}`,
		`{"type":"call","id":-0,"global":"t","name":"n","args":1}`, // C204
		`{"type":"call","id":-0.0,"global":"t","name":"n","args":1}`,
		`{"type":"call","id":1,"global":"t","name":"n","args":[-0]}`,
		`{"type":"done","error":"boom"}`, // C201
		`{"type":"done","error":null}`,
		`{"type":"done","error":{}}`,
		`{"type":"done","error":{"message":42}}`,
		`{"type":"done","error":{"message":"m"}}`, // C200: no kind
		`{"type":"done","error":{"kind":"timeout","message":"m"}}`,
		`{"type":"done","error":{"kind":"exception","message":"m","kind":"exception"}}`,
		`null`, `42`, `"str"`, `[]`, `{}`, `{"type":"unknown"}`, // C202
		`{"type":"boot"}`, `{"type":7}`, `{"type":"boot-ack"`, `{"type":"boot-ack"} x`, ``, ` `,
		`{"type":"log","text":"a","n":9007199254740993}`, // C209
		`{"type":"log","text":"a","n":-9007199254740993}`,
		`{"type":"log","text":"a","n":1` + strings.Repeat("0", 399) + `}`,
		`{"type":"done","value":9007199254740993}`,
		`{"type":"log","type":"log","text":"a"}`, // repeated read member
		`{"type":"log","text":"a","open":true,"open":false}`,
		`{"type":"log","text":"a","args":1,"args":2}`, // a frame field, even if unread for log
		`{"type":"done","error":{"kind":"exception","message":"m","line":1,"line":2}}`,
		"{\"type\":\"log\",\"text\":\"\xed\xa0\x80\"}", // encoded surrogate: invalid UTF-8
		"{\"type\":\"log\",\"text\":\"\xff\"}",
		"{\"type\":\"log\",\"text\":\"\xc0\xaf\"}", // overlong
		"{\"type\":\"log\",\"text\":\"a\tb\"}",     // raw control
		`{"type":"log","text":"\x"}`,
		`{"type":"log","text":"\u12"}`,
		`{"type":"log","text":"a",}`,
		`{"type":"log","text":01}`,
		"\ufeff{\"type\":\"boot-ack\"}",
	} {
		if f, ok := DecodeFrame([]byte(line)); ok {
			t.Errorf("%q kept as %+v", line, f)
		}
	}
}

// The rebuilt done value aliases the line, which is the caller's fresh frame.
func TestDecodeFrameDeepValue(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	f := decodeOK(t, `{"type":"done","value":`+deep+`}`)
	if string(f.Value) != deep {
		t.Fatal("deep value mangled")
	}
	f = decodeOK(t, `{"type":"call","id":0,"global":"g","name":"n","args":`+deep+`}`)
	if string(f.Args) != deep {
		t.Fatal("deep args mangled")
	}
}
