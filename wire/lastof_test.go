package wire

import (
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// C1112: a name repeated in an object counts once, its last member (what
// JSON.parse, Python's json and encoding/json keep), at every level the
// table and its checks read: params, a binding, its errorClass, limits, a
// file. A member present as null still counts as present where the rules
// say so ("mcp" beside "functions": null).
func TestC1112RepeatedMembersLastWins(t *testing.T) {
	limits := cfgLimits
	limits.MaxFileBytes = 1 << 20
	accepted := []struct {
		params string
		check  func(p protocol.RunParams) bool
	}{
		{`{"program":1,"program":"return 1"}`, func(p protocol.RunParams) bool { return p.Program == "return 1" }},
		{`{"program":"","bindings":[{"global":"1x","global":"tools","functions":["a"],"functions":["b"]}]}`,
			func(p protocol.RunParams) bool {
				return p.Bindings[0].Global == "tools" && strings.Join(p.Bindings[0].Names, ",") == "b"
			}},
		{`{"program":"","bindings":[{"global":"t","functions":["a"],"errorClass":{"name":"1","name":"ToolError","memberNameProperty":"x","memberNameProperty":"tool"}}]}`,
			func(p protocol.RunParams) bool {
				ec := p.Bindings[0].ErrorClass
				return ec != nil && ec.Name == "ToolError" && ec.MemberNameProperty == "tool"
			}},
		{`{"program":"","limits":{"cpuSeconds":"x","cpuSeconds":2},"limits":{"cpuSeconds":3,"maxWallMs":1e3}}`,
			func(p protocol.RunParams) bool { return p.Limits.CPUSeconds == 3 && p.Limits.MaxWallMs == 1000 }},
		{`{"program":"","files":[{"path":"/x","path":"a.txt","text":1,"text":"hi"}]}`,
			func(p protocol.RunParams) bool { return p.Files[0].Path == "a.txt" && string(p.Files[0].Data) == "hi" }},
		{`{"program":"","stream":"x","stream":true,"sessionId":1,"sessionId":null}`,
			func(p protocol.RunParams) bool { return p.Stream && p.SessionID == "" }},
	}
	for _, c := range accepted {
		p, err := ValidateRun([]byte(c.params), limits, noPackages)
		if err != nil || !c.check(p) {
			t.Errorf("%s: %+v, %v", c.params, p, err)
		}
	}
	refused := []struct{ params, msg string }{
		{`{"program":"","program":1}`, "program must be a string"},
		{`{"program":"","bindings":[{"global":"tools","global":1,"functions":[]}]}`, "bindings[0].global must be a string"},
		{`{"program":"","bindings":[{"global":"gh","mcp":"srv","functions":null}]}`,
			`bindings[0] has both "mcp" and "functions"; an mcp binding takes its functions from the server`},
		{`{"program":"","limits":{"cpuSeconds":2,"cpuSeconds":0}}`, "limits.cpuSeconds must be a positive integer, got 0"},
		{`{"program":"","limits":{"zz":1,"cpuSeconds":1,"aa":1}}`, "limits.aa is not a known limit"},
		{`{"program":"","files":[{"path":"a","text":"x","text":null}]}`, "files[0] must have exactly one of text and base64"},
	}
	for _, c := range refused {
		if _, err := ValidateRun([]byte(c.params), limits, noPackages); err == nil || err.Error() != c.msg {
			t.Errorf("%s: %v, want %q", c.params, err, c.msg)
		}
	}
}
