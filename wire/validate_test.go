package wire

import (
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

var cfgLimits = protocol.Limits{CPUSeconds: 60, MaxWallMs: 600000, AddressSpaceMb: 512, MaxLogBytes: 65536, MaxValueBytes: 32768}

func tools(fns string) string { return `[{"global":"tools","functions":` + fns + `}]` }

func ec(name, prop string) string {
	return `[{"global":"tools","functions":[],"errorClass":{"name":` + name + `,"memberNameProperty":` + prop + `}}]`
}

// ValidationCases are the −32602 messages of docs/protocol.md §3.4 / docs/configuration.md §4
// (the e2e suite replays them through the binary).
var validationCases = []struct{ params, msg string }{
	{`null`, "params must be an object"},
	{`[]`, "params must be an object"},
	{`{}`, "program must be a string"},
	{`{"program":1}`, "program must be a string"},
	{`{"program":"","bindings":{}}`, "bindings must be an array"},
	{`{"program":"","bindings":[1]}`, "bindings[0] must be an object"},
	{`{"program":"","bindings":[{"functions":[]}]}`, "bindings[0].global must be a string"},
	// C21, C181
	{`{"program":"","bindings":[{"global":"1bad","functions":[]}]}`, `bindings[0].global "1bad" is not a usable Python identifier`},
	{`{"program":"","bindings":[{"global":"class","functions":[]}]}`, `bindings[0].global "class" is not a usable Python identifier`},
	{`{"program":"","bindings":[{"global":"$tools","functions":[]}]}`, `bindings[0].global "$tools" is not a usable Python identifier`},
	{`{"program":"","bindings":[{"global":"lambda","functions":[]}]}`, `bindings[0].global "lambda" is not a usable Python identifier`},
	{`{"program":"","bindings":[{"global":"typeof","functions":[]}]}`, `bindings[0].global "typeof" is not a usable Python identifier`},
	{`{"program":"","bindings":[{"global":"caf\u00e9\n","functions":[]}]}`, `bindings[0].global "café\n" is not a usable Python identifier`},
	{`{"program":"","bindings":[{"global":"\ud800","functions":[]}]}`, `bindings[0].global "\ud800" is not a usable Python identifier`},
	// C22
	{`{"program":"","bindings":[{"global":"tools","functions":[]},{"global":"tools","functions":[]}]}`, `bindings[1].global "tools" is a duplicate binding global`},
	// C97
	{`{"program":"","bindings":[{"global":"__coderun_main__","functions":[]}]}`, `bindings[0].global "__coderun_main__" collides with a runtime-owned global`},
	{`{"program":"","bindings":[{"global":"console","functions":[]}]}`, `bindings[0].global "console" collides with a runtime-owned global`},
	{`{"program":"","bindings":[{"global":"__debug__","functions":[]}]}`, `bindings[0].global "__debug__" collides with a runtime-owned global`},
	{`{"program":"","bindings":[{"global":"__builtins__","functions":[]}]}`, `bindings[0].global "__builtins__" collides with a runtime-owned global`},
	{`{"program":"","bindings":[{"global":"__name__","functions":[]}]}`, `bindings[0].global "__name__" collides with a runtime-owned global`},
	{`{"program":"","bindings":[{"global":"a","functions":[],"errorClass":{"name":"E","memberNameProperty":"t"}},{"global":"E","functions":[]}]}`, `bindings[1].global "E" collides with another injected global`},
	{`{"program":"","bindings":` + `[{"global":"tools","functions":[],"errorClass":5}]}`, "bindings[0].errorClass must be an object"},
	{`{"program":"","bindings":` + ec(`1`, `"t"`) + `}`, "bindings[0].errorClass.name must be a string"},
	// C104
	{`{"program":"","bindings":` + ec(`"class"`, `"t"`) + `}`, `bindings[0].errorClass.name "class" is not a usable Python identifier`},
	{`{"program":"","bindings":` + ec(`"E"`, `null`) + `}`, "bindings[0].errorClass.memberNameProperty must be a string"},
	// C98
	{`{"program":"","bindings":` + ec(`"E"`, `""`) + `}`, "bindings[0].errorClass.memberNameProperty must be a non-empty attribute name"},
	// C100
	{`{"program":"","bindings":` + ec(`"E"`, `"__traceback__"`) + `}`, `bindings[0].errorClass.memberNameProperty "__traceback__" is a reserved error member and cannot be assigned`},
	{`{"program":"","bindings":` + ec(`"E"`, `"__dict__"`) + `}`, `bindings[0].errorClass.memberNameProperty "__dict__" is a reserved error member and cannot be assigned`},
	{`{"program":"","bindings":` + ec(`"E"`, `"__class__"`) + `}`, `bindings[0].errorClass.memberNameProperty "__class__" is a reserved error member and cannot be assigned`},
	{`{"program":"","bindings":` + ec(`"E"`, `"args"`) + `}`, `bindings[0].errorClass.memberNameProperty "args" is a reserved error member and cannot be assigned`},
	{`{"program":"","bindings":` + ec(`"E"`, `"name"`) + `}`, `bindings[0].errorClass.memberNameProperty "name" is a reserved error member and cannot be assigned`},
	{`{"program":"","bindings":` + ec(`"E"`, `"message"`) + `}`, `bindings[0].errorClass.memberNameProperty "message" is a reserved error member and cannot be assigned`},
	{`{"program":"","bindings":` + ec(`"E"`, `"stack"`) + `}`, `bindings[0].errorClass.memberNameProperty "stack" is a reserved error member and cannot be assigned`},
	{`{"program":"","bindings":` + ec(`"console"`, `"t"`) + `}`, `bindings[0].errorClass.name "console" collides with a runtime-owned global`},
	{`{"program":"","bindings":` + ec(`"tools"`, `"t"`) + `}`, `bindings[0].errorClass.name "tools" collides with another injected global`},
	// C14, C15
	{`{"program":"","bindings":` + tools(`["a", 7]`) + `}`, "bindings[0].functions[1] must be a name or {name, description?, parameters?, returns?}"},
	{`{"program":"","bindings":` + tools(`"a"`) + `}`, "bindings[0].functions must be an array of names or function objects"},
	{`{"program":"","bindings":[{"global":"tools"}]}`, "bindings[0].functions must be an array of names or function objects"},
	{`{"program":"","bindings":` + tools(`["a","b","a"]`) + `}`, `bindings[0].functions[2] "a" is a duplicate function name`},
	// typed functions (docs/protocol-typed.md §10.1): the typed package's messages, under the entry's path
	{`{"program":"","bindings":` + tools(`["a",{"name":"a"}]`) + `}`, `bindings[0].functions[1] "a" is a duplicate function name`},
	{`{"program":"","bindings":` + tools(`[{"name":"a","parameters":{"type":"object"}},"a"]`) + `}`, `bindings[0].functions[1] "a" is a duplicate function name`},
	{`{"program":"","bindings":` + tools(`["a",{"name":"b","parameters":{"type":"string"}}]`) + `}`, `bindings[0].functions[1].parameters: must be an object schema ("type": "object")`},
	{`{"program":"","bindings":` + tools(`[{"name":"b","parameters":[]}]`) + `}`, `bindings[0].functions[0].parameters: must be an object schema ("type": "object")`},
	{`{"program":"","bindings":` + tools(`[{"name":"b","returns":{"$ref":"https://example.com/s.json"}}]`) + `}`, `bindings[0].functions[0].returns: /$ref: "https://example.com/s.json" is not a reference inside this schema (only "#/$defs/..." pointers are allowed)`},
	{`{"program":"","bindings":` + tools(`[{"name":"b","parameters":{"type":"object"},"parameter":{}}]`) + `}`, `bindings[0].functions[0]: must be a name or {name, description?, parameters?, returns?}: unknown field "parameter"`},
	{`{"program":"","bindings":` + tools(`[{"description":"x"}]`) + `}`, `bindings[0].functions[0].name: is required`},
	// limits (docs/configuration.md §4)
	{`{"program":"","limits":[]}`, "limits must be an object"},
	{`{"program":"","limits":{"zeta":1,"beta":2,"cpuSeconds":0}}`, "limits.beta is not a known limit"},
	{`{"program":"","limits":{"graceMs":1}}`, "limits.graceMs is not a known limit"},
	{`{"program":"","limits":{"cpuSeconds":0}}`, "limits.cpuSeconds must be a positive integer, got 0"},
	{`{"program":"","limits":{"maxWallMs":-1}}`, "limits.maxWallMs must be a positive integer, got -1"},
	{`{"program":"","limits":{"maxWallMs":1.5}}`, "limits.maxWallMs must be a positive integer, got 1.5"},
	{`{"program":"","limits":{"maxWallMs":"5"}}`, `limits.maxWallMs must be a positive integer, got "5"`},
	{`{"program":"","limits":{"maxWallMs":null}}`, "limits.maxWallMs must be a positive integer, got null"},
	{`{"program":"","limits":{"maxWallMs":1e400}}`, "limits.maxWallMs must be a positive integer, got 1e400"},
	{`{"program":"","limits":{"cpuSeconds":61}}`, "limits.cpuSeconds must not exceed the daemon's configured 60, got 61"},
	{`{"program":"","limits":{"cpuSeconds":6.1e1}}`, "limits.cpuSeconds must not exceed the daemon's configured 60, got 61"},
	{`{"program":"","limits":{"maxWallMs":1e300}}`, "limits.maxWallMs must not exceed the daemon's configured 600000, got 1e+300"},
	// C163
	{`{"program":"","limits":{"maxLogBytes":63}}`, "limits.maxLogBytes must be at least 64, got 63"},
	// C53
	{`{"program":"","limits":{"addressSpaceMb":64}}`, "limits.addressSpaceMb must exceed the 67108864-byte interpreter baseline with room for the output budgets, got 64"},
	{`{"program":"","stream":"yes"}`, "stream must be a boolean"},
	{`{"program":"","stream":1}`, "stream must be a boolean"},
}

func TestValidationMessages(t *testing.T) {
	for _, c := range validationCases {
		_, err := ValidateRun([]byte(c.params), cfgLimits, noPackages)
		if err == nil || err.Error() != c.msg {
			t.Errorf("%s:\n got %v\nwant %s", c.params, err, c.msg)
		}
	}
}

// The 12x rule on effective values, against a configuration with large budgets.
func TestValidationRoom(t *testing.T) {
	big := protocol.Limits{CPUSeconds: 60, MaxWallMs: 600000, AddressSpaceMb: 4096, MaxLogBytes: 10000000, MaxValueBytes: 20000000}
	for _, c := range []struct{ params, msg string }{
		{`{"program":"","limits":{"addressSpaceMb":100}}`, "limits: maxLogBytes 10000000 times the 12x worst-case Unicode expansion must fit within the 37748736 bytes left after the 67108864-byte interpreter baseline of addressSpaceMb 100; the most it may be is 3145727"},
		{`{"program":"","limits":{"addressSpaceMb":100,"maxLogBytes":64}}`, "limits: maxValueBytes 20000000 times the 12x worst-case Unicode expansion must fit within the 37748736 bytes left after the 67108864-byte interpreter baseline of addressSpaceMb 100; the most it may be is 3145727"},
		{`{"program":"","limits":{"addressSpaceMb":1e2,"maxLogBytes":64,"maxValueBytes":3145728}}`, "limits: maxValueBytes 3145728 times the 12x worst-case Unicode expansion must fit within the 37748736 bytes left after the 67108864-byte interpreter baseline of addressSpaceMb 100; the most it may be is 3145727"},
	} {
		_, err := ValidateRun([]byte(c.params), big, noPackages)
		if err == nil || err.Error() != c.msg {
			t.Errorf("%s:\n got %v\nwant %s", c.params, err, c.msg)
		}
	}
	if _, err := ValidateRun([]byte(`{"program":"","limits":{"addressSpaceMb":100,"maxLogBytes":64,"maxValueBytes":3145727}}`), big, noPackages); err != nil {
		t.Error(err)
	}
}

func TestValidationAccepts(t *testing.T) {
	for _, p := range []string{
		`{"program":"","bindings":null,"limits":null,"stream":null,"extra":1}`,
		`{"program":"","bindings":[{"global":"tools","functions":["__proto__","my-tool",""],"errorClass":null,"x":1}]}`,
		`{"program":"","bindings":` + ec(`"ToolError"`, `"tool-name"`) + `}`,
		`{"program":"","bindings":` + ec(`"E"`, `"__"`) + `}`,
		`{"program":"","bindings":` + ec(`"E"`, `"_private"`) + `}`,
		`{"program":"","bindings":` + ec(`"E"`, `"code"`) + `}`,
		`{"program":"","bindings":` + tools(`[{"name":"my-tool","description":"d","parameters":{"type":"object"},"returns":true},"b"]`) + `}`,
		`{"program":"","limits":{"maxWallMs":1000,"cpuSeconds":1e1,"maxValueBytes":1000.0,"maxLogBytes":64,"addressSpaceMb":512}}`,
	} {
		if _, err := ValidateRun([]byte(p), cfgLimits, noPackages); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	p, _ := ValidateRun([]byte(`{"program":"a\ud800","limits":{"maxWallMs":1e3}}`), cfgLimits, noPackages)
	if p.Program != "a\xed\xa0\x80" || p.Limits.MaxWallMs != 1000 || p.Bindings == nil {
		t.Errorf("%+v", p)
	}
}

// C1–C4: the reserved tables.
func TestReservedTables(t *testing.T) {
	if len(runtimeOwned) != 6 || !runtimeOwned["display"] || !runtimeOwned["console"] || !runtimeOwned["__coderun_main__"] ||
		!runtimeOwned["__builtins__"] || !runtimeOwned["__name__"] || !runtimeOwned["__debug__"] || runtimeOwned["tools"] {
		t.Error("runtime-owned set")
	}
	want := "name message stack args with_traceback add_note"
	if len(reservedMembers) != 6 || reservedMembers["code"] {
		t.Error("reserved members")
	}
	for _, m := range strings.Fields(want) {
		if !reservedMembers[m] {
			t.Error(m)
		}
	}
	for _, d := range []string{"__dict__", "__init__", "__x__"} {
		if !isDunder(d) {
			t.Error(d)
		}
	}
	for _, d := range []string{"_private", "name", "__mid", "__", "____"} {
		if isDunder(d) {
			t.Error(d)
		}
	}
	for _, w := range []string{"function", "lambda", "nonlocal", "class", "match", "_", "await", "None", "eval"} {
		if !reservedWords[w] {
			t.Error(w)
		}
	}
	if reservedWords["tools"] {
		t.Error("tools reserved")
	}
}
