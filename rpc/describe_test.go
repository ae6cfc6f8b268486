package rpc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

func describeReq(id, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"bindings/describe","params":` + params + `}`
}

func TestDescribe(t *testing.T) {
	h := start(t)
	h.send(describeReq("1", `{"bindings":[]}`))
	h.expect(errResp("1", -32002, "server not initialized"))
	h.init()
	h.send(describeReq("2", `{"bindings":[{"global":"tools","functions":[`+searchDecl+`,"old"]}],"limits":{"cpuSeconds":5}}`))
	var res struct {
		Result struct{ Stubs string } `json:"result"`
	}
	got := h.recv()
	if err := json.Unmarshal([]byte(got), &res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Budgets: CPU 5 s, wall 600000 ms, log 65536 bytes, value 32768 bytes.\n# Python 3.11.7.",
		"class Tools:\n", "    async def search(self, q: str, limit: int = 10) -> list[str]:\n",
		"    async def old(self, args: Any = None) -> Any:\n", "tools: Tools\n",
	} {
		if !strings.Contains(res.Result.Stubs, want) {
			t.Errorf("stubs lack %q:\n%s", want, res.Result.Stubs)
		}
	}
	if !strings.Contains(got, `-> list[str]`) {
		t.Error("the response escapes the stub text")
	}
	for i, c := range []struct{ params, msg string }{
		{`[]`, "params must be an object"},
		{`{"bindings":{}}`, "bindings must be an array"},
		{`{"bindings":[{"global":"tools","functions":[{"name":"f","parameters":{"type":"string"}}]}]}`,
			`bindings[0].functions[0].parameters: must be an object schema ("type": "object")`},
		{`{"limits":{"cpuSeconds":61}}`, "limits.cpuSeconds must not exceed the daemon's configured 60, got 61"},
	} {
		id := string(rune('a' + i))
		h.send(describeReq(`"`+id+`"`, c.params))
		h.expect(errResp(`"`+id+`"`, protocol.CodeInvalidParams, c.msg))
	}
	h.send(describeReq("3", `null`))
	h.expect(errResp("3", protocol.CodeInvalidParams, "params must be an object"))
	h.send(`{"jsonrpc":"2.0","id":4,"method":"shutdown"}`)
	h.expect(`{"jsonrpc":"2.0","id":4,"result":null}`)
	h.send(describeReq("5", `{}`))
	h.expect(errResp("5", -32600, "server is shutting down"))
	if len(h.runner.submits) != 0 {
		t.Error("describe submitted a run")
	}
}
