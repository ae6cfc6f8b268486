package session

import "testing"

func TestSmoke(t *testing.T) {
	runCases(t, nil, []tcase{
		{name: "return1", program: "return 1", value: "1", logs: []string{}},
		{name: "binding", program: `return await tools.echo({"n": 1})`, bindings: tools("echo"),
			client: map[string]behaviour{"echo": wrap()}, value: `{"echoed":{"n":1}}`, nCalls: 1},
	})
}
