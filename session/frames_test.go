package session

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

func TestBootFrame(t *testing.T) {
	got := string(bootFrame(protocol.Limits{CPUSeconds: 60, AddressSpaceMb: 512, MaxLogBytes: 65536, MaxValueBytes: 32768, MaxWallMs: 1},
		[]protocol.Namespace{{Global: "tools", Names: []string{"search", "my-tool"},
			ErrorClass: &protocol.ErrorClass{Name: "ToolError", MemberNameProperty: "tool"}}}, nil))
	want := `{"type":"boot","cpuSeconds":60,"addressSpaceBytes":536870912,"maxLogBytes":65536,"maxValueBytes":32768,"maxOutputBytes":0,"namespaces":[{"global":"tools","names":["search","my-tool"],"errorClass":{"name":"ToolError","memberNameProperty":"tool"}}]}` + "\n"
	if got != want {
		t.Errorf("boot frame\n got %s\nwant %s", got, want)
	}
	got = string(bootFrame(protocol.Limits{CPUSeconds: 1, AddressSpaceMb: 8589934591, MaxLogBytes: 64, MaxValueBytes: 1},
		[]protocol.Namespace{{Global: "a", Names: []string{}}, {Global: "b", Names: []string{"<x>\u2028", "\xed\xa0\x80"}}}, nil))
	want = `{"type":"boot","cpuSeconds":1,"addressSpaceBytes":9007199253692416,"maxLogBytes":64,"maxValueBytes":1,"maxOutputBytes":0,"namespaces":[{"global":"a","names":[]},{"global":"b","names":["<x>` + "\u2028" + `","\ud800"]}]}` + "\n"
	if got != want {
		t.Errorf("boot frame\n got %s\nwant %s", got, want)
	}
	if got := string(bootFrame(protocol.Limits{}, nil, nil)); !strings.HasSuffix(got, `"namespaces":[]}`+"\n") {
		t.Errorf("no namespaces: %s", got)
	}
	if got := string(bootFrame(protocol.Limits{}, nil, []string{"/cache/sets/a\"b"})); !strings.HasSuffix(got, `"namespaces":[],"sysPath":["/cache/sets/a\"b"]}`+"\n") {
		t.Errorf("sysPath: %s", got)
	}
}

func TestDaemonFrames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{string(runFrame("print('a\"b')\n\xed\xb0\x80")), `{"type":"run","program":"print('a\"b')\n\udc00"}` + "\n"},
		{string(replyOK(7, []byte(`{"a":[1,2]}`))), `{"type":"reply","id":7,"ok":true,"value":{"a":[1,2]}}` + "\n"},
		{string(replyErr(0, "nope \"x\"")), `{"type":"reply","id":0,"ok":false,"message":"nope \"x\""}` + "\n"},
		{judged(1, Answer{HasResult: true, Result: []byte(`[1.0, 2e0]`)}), `{"type":"reply","id":1,"ok":true,"value":[1,2]}` + "\n"},
		{judged(1, Answer{HasResult: true, Result: []byte(`-0`)}), `{"type":"reply","id":1,"ok":false,"message":"binding resolution must be lossless JSON"}` + "\n"},
		{judged(1, Answer{HasResult: true, Result: []byte(`null`)}), `{"type":"reply","id":1,"ok":true,"value":null}` + "\n"},
		{judged(2, Answer{HasError: true}), `{"type":"reply","id":2,"ok":false,"message":"<unrenderable rejection value>"}` + "\n"},
		{judged(2, Answer{}), `{"type":"reply","id":2,"ok":false,"message":"<unrenderable rejection value>"}` + "\n"},
		{judged(3, Answer{HasError: true, HasResult: true, Result: []byte("1"), Message: new("m")}), `{"type":"reply","id":3,"ok":false,"message":"m"}` + "\n"},
	} {
		if c.got != c.want {
			t.Errorf("got  %s\nwant %s", c.got, c.want)
		}
	}
}

// judged is judgeAnswer's frame for an untyped function.
func judged(id int64, a Answer) string {
	frame, _ := judgeAnswer(id, a, nil)
	return string(frame)
}

func TestUnknownBindingMessage(t *testing.T) {
	for _, c := range []struct {
		g, n string
		cap  int64
		want string
	}{
		{"tools", "forged", 32768, `unknown binding "tools.forged"`},
		{"tools", "a\"b", 32768, `unknown binding "tools.a\"b"`},
		{"t", "\xed\xa0\x80", 32768, `unknown binding "t.\ud800"`},
		// preview: first 1024 characters of the target, JSON-quoted
		{"tools", strings.Repeat("n", 100000), 1048576, `unknown binding "tools.` + strings.Repeat("n", 1024-6) + `"`},
		{strings.Repeat("é", 2000), "x", 1048576, `unknown binding "` + strings.Repeat("é", 1024) + `"`},
		// each part cut to maxValueBytes at a character boundary, then capMessage
		{"ab", "é€", 3, protocol.MessageMarker},
		{"abcdef", "ghijkl", 64, `unknown binding "abcdef.ghijkl"`},
		{"abcdef", "ghijkl", 40, `unknown binding "abcdef.ghijkl"`},
		{strings.Repeat("g", 100), strings.Repeat("n", 100), 40, `unknown binding "gggggggg` + protocol.MessageMarker},
	} {
		if got := unknownBindingMessage(c.g, c.n, c.cap); got != c.want {
			t.Errorf("unknownBindingMessage(%.20q, %.20q, %d)\n got %q\nwant %q", c.g, c.n, c.cap, got, c.want)
		}
	}
	if got := previewTarget("ab", "é€", 1024); got != "ab.é€" {
		t.Errorf("previewTarget = %q", got)
	}
	if got := previewTarget("abc", "def", 4); got != "abc." {
		t.Errorf("previewTarget = %q", got)
	}
	for _, c := range []struct {
		s    string
		cap  int64
		want string
	}{
		{"é€", 3, "é"}, {"é€", 2, "é"}, {"é€", 1, ""}, {"abc", 0, ""}, {"a\xed\xa0\x80b", 3, "a"}, {"a\xed\xa0\x80b", 4, "a\xed\xa0\x80"},
		{"😀x", 4, "😀"}, {"😀x", 3, ""}, {"abc", 10, "abc"},
	} {
		if got := cutBytes(c.s, c.cap); got != c.want {
			t.Errorf("cutBytes(%q, %d) = %q, want %q", c.s, c.cap, got, c.want)
		}
	}
}

func TestEffectiveLimits(t *testing.T) {
	cfg := protocol.Limits{CPUSeconds: 60, MaxWallMs: 600000, AddressSpaceMb: 512, MaxLogBytes: 65536, MaxValueBytes: 32768}
	got := EffectiveLimits(cfg, protocol.Limits{CPUSeconds: 1, MaxLogBytes: 64})
	want := protocol.Limits{CPUSeconds: 1, MaxWallMs: 600000, AddressSpaceMb: 512, MaxLogBytes: 64, MaxValueBytes: 32768}
	if got != want {
		t.Errorf("effectiveLimits = %+v, want %+v", got, want)
	}
	if got := EffectiveLimits(cfg, protocol.Limits{}); got != cfg {
		t.Errorf("no run limits: %+v", got)
	}
}

func TestClassifyMessages(t *testing.T) {
	if e := exitedEarly(7, "", false); e.Message != "python exited (code=7, signal=null) before completing" || *e.ExitCode != 7 || e.Signal != "" {
		t.Errorf("%+v", e)
	}
	if e := exitedEarly(-1, "SIGKILL", true); e.Message != "python exited (code=null, signal=SIGKILL) before completing" || e.ExitCode != nil || e.Signal != "SIGKILL" {
		t.Errorf("%+v", e)
	}
	if e := cpuTimeout(42); e.Message != "CPU time exhausted (limit at most 42s; a stricter inherited RLIMIT_CPU can fire sooner)" || e.Budget != "cpu" {
		t.Errorf("%+v", e)
	}
	if !cpuAtLeast(2e9, 2) || cpuAtLeast(1999999999, 2) || cpuAtLeast(1<<62, 9007199254740990) {
		t.Errorf("cpuAtLeast")
	}
}

func TestTypedFrames(t *testing.T) {
	def := "'x'"
	sig := &protocol.Signature{Params: []protocol.Param{{Name: "q", Required: true}, {Name: "mode", Default: &def}},
		Doc: "Find.", Stub: "async def search(self, q: str, mode: str = 'x') -> Any:\n    \"\"\"Find.\"\"\"\n"}
	got := string(bootFrame(protocol.Limits{CPUSeconds: 1, AddressSpaceMb: 1, MaxLogBytes: 64, MaxValueBytes: 1},
		[]protocol.Namespace{{Global: "tools", Names: []string{"search", "old"}, Signatures: []*protocol.Signature{sig, nil}}}, nil))
	want := `{"type":"boot","cpuSeconds":1,"addressSpaceBytes":1048576,"maxLogBytes":64,"maxValueBytes":1,"maxOutputBytes":0,"namespaces":[{"global":"tools","names":["search","old"],` +
		`"signatures":[{"params":[{"name":"q","required":true},{"name":"mode","required":false,"default":"'x'"}],"doc":"Find.",` +
		`"stub":"async def search(self, q: str, mode: str = 'x') -> Any:\n    \"\"\"Find.\"\"\"\n"},null]}]}` + "\n"
	if got != want {
		t.Errorf("typed boot frame\n got %s\nwant %s", got, want)
	}
	if got := string(replyTypeErr(4, "tools.search(): invalid arguments: /q: expected string, but got integer")); got !=
		`{"type":"reply","id":4,"ok":false,"message":"tools.search(): invalid arguments: /q: expected string, but got integer","typeError":true}`+"\n" {
		t.Errorf("typeError reply: %s", got)
	}
}

// The session frames decode as protocol's BootMessage and RunMessage, with
// "session":true last in the boot and the run's budgets and bindings in the
// run (docs/child-protocol-sessions.md §6.1, §6.2).
func TestSessionFrames(t *testing.T) {
	lim := protocol.Limits{CPUSeconds: 5, MaxWallMs: 1000, AddressSpaceMb: 256, MaxLogBytes: 100, MaxValueBytes: 200, MaxOutputBytes: 300}
	boot := sessionBootFrame(lim, 3600, nil)
	var b protocol.BootMessage
	if err := json.Unmarshal(boot, &b); err != nil || !b.Session || b.CPUSeconds != 3600 ||
		b.AddressSpaceBytes != 256<<20 || len(b.Namespaces) != 0 || !bytes.HasSuffix(boot, []byte(`,"session":true}`+"\n")) {
		t.Errorf("boot %s: %+v %v", boot, b, err)
	}
	run := sessionRunFrame("return 1", lim, []protocol.Namespace{{Global: "tools", Names: []string{"a"}}})
	var r protocol.RunMessage
	if err := json.Unmarshal(run, &r); err != nil || r.Type != "run" || r.Program != "return 1" || r.CPUSeconds != 5 ||
		r.MaxLogBytes != 100 || r.MaxValueBytes != 200 || r.MaxOutputBytes != 300 || len(r.Namespaces) != 1 || r.Namespaces[0].Global != "tools" {
		t.Errorf("run %s: %+v %v", run, r, err)
	}
}

// C1008: withEnv adds the "env" member last, names and values escaped; no
// entries leave the frame as it was.
func TestC1008BootFrameEnv(t *testing.T) {
	b := bootFrame(protocol.Limits{}, nil, nil)
	if got := string(withEnv(b, nil)); got != string(b) {
		t.Errorf("no env changed the frame: %s", got)
	}
	got := string(withEnv(b, []string{"API_KEY=coderun-placeholder-00", `Q="x=y`}))
	if !strings.HasSuffix(got, `"namespaces":[],"env":{"API_KEY":"coderun-placeholder-00","Q":"\"x=y"}}`+"\n") {
		t.Errorf("frame %s", got)
	}
	var m protocol.BootMessage
	if err := json.Unmarshal([]byte(got), &m); err != nil || m.Env["Q"] != `"x=y` {
		t.Errorf("decoded %+v %v", m, err)
	}
}
