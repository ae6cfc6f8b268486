package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// Typed bindings (docs/protocol-typed.md §10) through the real daemon and a real child.

// searchFn declares tools.search(q: str, limit: int = 10) -> list[str].
const searchFn = `{"name":"search","description":"Find documents.","parameters":{"type":"object",` +
	`"properties":{"q":{"type":"string","description":"what to look for"},"limit":{"type":"integer","minimum":1,"default":10}},` +
	`"required":["q"],"additionalProperties":false},"returns":{"type":"array","items":{"type":"string"}}}`

func typedTools(fns ...string) string {
	return `"bindings":[{"global":"tools","functions":[` + strings.Join(fns, ",") + `]}]`
}

// bindingCalls counts the binding/call requests the client has seen for function.
func (d *daemon) bindingCalls(function string) int {
	n := 0
	for _, e := range d.snapshot() {
		var p callParams
		if e.m.Method == "binding/call" && json.Unmarshal(e.m.Params, &p) == nil && p.Function == function {
			n++
		}
	}
	return n
}

// Positional and keyword arguments become one named args object, in stub
// order; the host's conforming result reaches the program.
func TestTypedCallMapsArguments(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	d.behave("search", func(p callParams) string { q, _ := json.Marshal(string(p.Args)); return `"result":[` + string(q) + `]` })
	r := d.run(prog(`return [await tools.search("x", 3), await tools.search(limit=2, q="y"), await tools.search("z")]`,
		typedTools(searchFn)))
	expectOK(t, r, `[["{\"q\":\"x\",\"limit\":3}"],["{\"q\":\"y\",\"limit\":2}"],["{\"q\":\"z\"}"]]`)
	if r.Stats.BindingCalls != 3 {
		t.Errorf("bindingCalls %d, want 3", r.Stats.BindingCalls)
	}
}

// Arguments that break the parameters schema raise TypeError in the program
// with every failing pointer; the host never sees the call and it is not
// counted. The program goes on and can call again.
func TestTypedArgumentsRefusedBeforeTheHost(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	d.behave("search", constant(`["hit"]`))
	r := d.run(prog(`out = []
for call in (lambda: tools.search("x", limit="5"), lambda: tools.search(q=1, limit=0), lambda: tools.search("x", extra=1)):
    try:
        await call()
    except TypeError as e:
        out.append(str(e))
out.append(await tools.search("ok"))
return out`, typedTools(searchFn)))
	expectOK(t, r, `["tools.search(): invalid arguments: /limit: expected integer, but got string",`+
		`"tools.search(): invalid arguments: /limit: must be >= 1, but is 0; /q: expected string, but got number",`+
		`"tools.search() got an unexpected keyword argument 'extra'",["hit"]]`)
	if r.Stats.BindingCalls != 1 || d.bindingCalls("search") != 1 {
		t.Errorf("bindingCalls %d, host saw %d calls; want 1 and 1", r.Stats.BindingCalls, d.bindingCalls("search"))
	}
}

// A keyword the stub does not declare raises Python's TypeError before
// anything is sent; with additionalProperties the stub shows **kwargs of its
// type and the keyword passes to the schema check and the host.
func TestTypedUndeclaredKeywords(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	open := `{"name":"tag","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],` +
		`"additionalProperties":{"type":"integer"}}}`
	closed := `{"name":"find","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}`
	d.behave("tag", echo)
	r := d.run(prog(`out = []
try:
    await tools.find("a", bogus=1)
except TypeError as e:
    out.append(str(e))
out.append(await tools.tag("a", n=2))
try:
    await tools.tag("a", n="x")
except TypeError as e:
    out.append(str(e))
return out`, typedTools(open, closed)))
	expectOK(t, r, `["tools.find() got an unexpected keyword argument 'bogus'",{"q":"a","n":2},`+
		`"tools.tag(): invalid arguments: /n: expected integer, but got string"]`)
	if d.bindingCalls("find") != 0 {
		t.Errorf("the host saw %d calls of find", d.bindingCalls("find"))
	}
	m := d.call("bindings/describe", `{`+typedTools(open)+`}`)
	var stubs struct {
		Stubs string `json:"stubs"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &stubs) != nil || !strings.Contains(stubs.Stubs, "async def tag(self, q: str, **kwargs: int)") {
		t.Errorf("describe: %+v %s", m.Error, m.Result)
	}
}

// A host result that breaks the returns schema raises the namespace's error
// class (else RuntimeError) naming the pointers, and the daemon logs a warning
// naming the run, the namespace and the function.
func TestTypedResultRefusedWithWarning(t *testing.T) {
	t.Parallel()
	d := started(t, map[string]string{"CODERUN_LOG_LEVEL": "warn"})
	d.behave("search", constant(`["a", 2]`))
	id := d.request("run", prog(`try:
    await tools.search("x")
except RuntimeError as e:
    return [type(e).__name__, str(e)]`, typedTools(searchFn)))
	expectOK(t, d.result(d.wait(id)), `["RuntimeError","tools.search(): the host's result did not match the declared returns schema: /1: expected string, but got number"]`)
	warn := "level=WARN msg=\"binding result does not match its declared returns schema\" runId=" + id +
		" namespace=tools function=search problems=\"/1: expected string, but got number\""
	if !d.stderr.logged(warn) {
		t.Errorf("no warning %q in stderr:\n%s", warn, d.stderr)
	}
	r := d.run(prog(`try:
    await tools.search("x")
except ToolError as e:
    return [type(e).__name__, e.tool]`,
		`"bindings":[{"global":"tools","functions":[`+searchFn+`],"errorClass":{"name":"ToolError","memberNameProperty":"tool"}}]`))
	expectOK(t, r, `["ToolError","search"]`)
}

// Schema constants beyond 2^53 are compared exactly both ways (through a
// double, each case here would pass), and values travel exactly. Doubles
// are 4 apart above 2^54 = 18014398509481984, so the bounds in between are
// not doubles.
func TestTypedBigIntegersExact(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	fn := `{"name":"big","parameters":{"type":"object","properties":{"n":{"type":"integer","maximum":18014398509481983}}},` +
		`"returns":{"type":"integer","minimum":18014398509481985}}`
	d.behave("big", func(p callParams) string {
		if string(p.Args) == `{"n":18014398509481982}` {
			return `"result":18014398509481988`
		}
		return `"result":18014398509481984`
	})
	r := d.run(prog(`out = [await tools.big(18014398509481982)]
for n in (18014398509481984, 0):
    try:
        await tools.big(n)
    except Exception as e:
        out.append(type(e).__name__ + ": " + str(e))
return out`, typedTools(fn)))
	expectOK(t, r, `[18014398509481988,"TypeError: tools.big(): invalid arguments: /n: must be <= 18014398509481983, but is 18014398509481984",`+
		`"RuntimeError: tools.big(): the host's result did not match the declared returns schema: (root): must be >= 18014398509481985, but is 18014398509481984"]`)
}

// The program sees the stub: __doc__, inspect.signature, help().
func TestTypedIntrospection(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	r := d.run(prog(`import inspect, io, contextlib
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    help(tools.search)
return [tools.search.__doc__, str(inspect.signature(tools.search)), "async def search(self, q: str, limit: int = 10)" in buf.getvalue()]`,
		typedTools(searchFn, `"plain"`)))
	expectOK(t, r, `["Find documents.\n\nArgs:\n    q: what to look for","(q: 'str', limit: 'int' = 10) -> 'list[str]'",true]`)
}

// Every bad declaration is −32602 naming its path, nothing is spawned, and
// the daemon keeps serving; hostile declarations (very deep, cyclic, bad
// patterns, huge descriptions) included.
func TestTypedDeclarationsRefused(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	d := started(t, map[string]string{"TMPDIR": tmp, "CODERUN_WARM_POOL": "0", "CODERUN_START_MODE": "spawn"})
	fn := func(decl string) string { return prog("return 1", typedTools(`"first"`, decl)) }
	obj := func(props string) string {
		return `{"name":"f","parameters":{"type":"object","properties":` + props + `}}`
	}
	deep := strings.Repeat(`{"items":`, 100000) + `{}` + strings.Repeat(`}`, 100000)
	cases := []struct{ params, msg string }{
		{fn(`{"name":"f","parameters":{"type":"string"}}`), `bindings[0].functions[1].parameters: must be an object schema ("type": "object")`},
		{fn(`{"name":"f","parameters":[]}`), `bindings[0].functions[1].parameters: must be an object schema ("type": "object")`},
		{fn(obj(`{"a":{"$ref":"https://example.com/a.json"}}`)), `bindings[0].functions[1].parameters: /properties/a/$ref: "https://example.com/a.json" is not a reference inside this schema (only "#/$defs/..." pointers are allowed)`},
		{fn(obj(`{"a":{"$ref":"file:///etc/passwd"}}`)), `bindings[0].functions[1].parameters: /properties/a/$ref: "file:///etc/passwd" is not a reference inside this schema (only "#/$defs/..." pointers are allowed)`},
		{fn(obj(`{"a":{"type":"strin"}}`)), `bindings[0].functions[1].parameters: not a valid schema: /properties/a/type: expected array, but got string; /properties/a/type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'`},
		{fn(obj(`{"a":{"type":"string","pattern":"(?<=a)b"}}`)), "bindings[0].functions[1].parameters: not a valid schema: /properties/a/pattern: '(?<=a)b' is not valid regex: error parsing regexp: invalid named capture: `(?<=a)b`"},
		{fn(`{"name":"f","parameters":{"type":"object","$defs":{"b":{"$ref":"#/$defs/b"}},"properties":{"a":{"$ref":"#/$defs/b"}}}}`), `bindings[0].functions[1].parameters: $ref cycle: a schema refers back to itself without descending into the value`},
		{fn(`{"name":"f","returns":` + deep + `}`), `bindings[0].functions[1]: not valid JSON: invalid character '{' exceeded max depth`},
		{fn(`{"name":"f","description":"` + strings.Repeat("d", 3<<20) + `"}`), `bindings[0].functions[1].description: is 3145728 bytes; the most allowed is 16384`},
		{fn(`{"name":"f","parameters":{"type":"object"},"parameter":{}}`), `bindings[0].functions[1]: must be a name or {name, description?, parameters?, returns?}: unknown field "parameter"`},
		{fn(`{"description":"no name"}`), `bindings[0].functions[1].name: is required`},
		{fn(`{"name":""}`), `bindings[0].functions[1].name: is required`},
		{fn(`{"name":7}`), `bindings[0].functions[1]: must be a name or {name, description?, parameters?, returns?}: cannot unmarshal number into Go struct field entry.name of type string`},
		{fn(`{"name":"first","parameters":{"type":"object"}}`), `bindings[0].functions[1] "first" is a duplicate function name`},
		{fn(`true`), `bindings[0].functions[1] must be a name or {name, description?, parameters?, returns?}`},
	}
	for _, c := range cases {
		start := time.Now()
		expectError(t, d.call("run", c.params), -32602, c.msg)
		expectError(t, d.call("bindings/describe", `{`+c.params[strings.Index(c.params, `"bindings"`):]), -32602, c.msg)
		// not a speed goal (make bench has those): a refusal that takes a minute
		// is a pathological, super-linear check, which a -race build under load
		// is far from
		if took := time.Since(start); took > time.Minute {
			t.Errorf("%.80s: refused after %v", c.msg, took)
		}
	}
	if procs, dirs := runProcs(tmp), runDirs(tmp); len(procs) != 0 || len(dirs) != 0 {
		t.Errorf("an invalid run spawned: processes %v, directories %v", procs, dirs)
	}
	expectOK(t, d.run(prog("return 1", typedTools(searchFn))), "1")
}

// bindings/describe: the stub parses, and mypy --strict accepts it as a .pyi.
func TestDescribeStubsTypeCheck(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	nested := `{"name":"create_issue","description":"Open an issue.","parameters":{"type":"object","properties":{` +
		`"repo":{"type":"object","title":"Repo","properties":{"owner":{"type":"string"},"name":{"type":"string"}},"required":["owner","name"]},` +
		`"labels":{"type":"array","items":{"enum":["bug","feature"]}},"max-results":{"type":"integer"},` +
		`"body":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null}},"required":["repo"]},` +
		`"returns":{"type":"object","properties":{"id":{"type":"integer"},"url":{"type":"string"}}}}`
	m := d.call("bindings/describe", `{"bindings":[{"global":"tools","functions":[`+searchFn+`,"legacy","my-tool"]},`+
		`{"global":"gh_api","functions":[`+nested+`]}],"limits":{"maxWallMs":5000}}`)
	if m.Error != nil {
		t.Fatalf("describe: %+v", m.Error)
	}
	var res struct{ Stubs string }
	if err := json.Unmarshal(m.Result, &res); err != nil || !strings.Contains(res.Stubs, "wall 5000 ms") ||
		!strings.Contains(res.Stubs, "class GhApi:") || !strings.Contains(res.Stubs, "gh_api: GhApi\n") {
		t.Fatalf("describe result %s (%v)", m.Result, err)
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "bindings.pyi")
	if err := os.WriteFile(stub, []byte(res.Stubs), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(realPython, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())", stub).CombinedOutput(); err != nil {
		t.Fatalf("ast.parse: %v\n%s\n%s", err, out, res.Stubs)
	}
	venv, _ := filepath.Abs("../.venv/bin/python")
	if _, err := os.Stat(venv); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no .venv for mypy under CI: %v", err)
		}
		t.Skip("no .venv (make deps); mypy not run")
	}
	out, err := exec.Command(venv, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", filepath.Join(dir, "cache"), stub).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Success") {
		t.Fatalf("mypy --strict: %v\n%s\n%s", err, out, res.Stubs)
	}
}

// A name entry next to typed functions keeps the old calling rules (one JSON
// argument, keywords as an object, none as null).
func TestTypedNamespaceKeepsUntypedRules(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	r := d.run(prog(`return [await tools.plain({"a": 1}), await tools.plain(b=2), await tools.plain()]`, typedTools(searchFn, `"plain"`)))
	expectOK(t, r, `[{"a":1},{"b":2},null]`)
}

// bombParams is a parameters schema whose two array alternatives both recurse
// (the review's schema bomb): the library's check of x nested d deep around a
// number tries 2^d paths.
const bombParams = `{"type":"object","properties":{"x":{"$ref":"#/$defs/v"}},"$defs":{"v":{"anyOf":[` +
	`{"type":"array","items":{"$ref":"#/$defs/v"}},{"type":"array","items":{"$ref":"#/$defs/v"},"minItems":1},` +
	`{"type":"string"}]}}}`

// bombCall is a program calling global.name(x=[[…[1]…]]) 40 deep, returning
// the TypeError's message.
func bombCall(global, name string) string {
	return `v = 1
for _ in range(40):
    v = [v]
try:
    await ` + global + `.` + name + `(x=v)
except TypeError as e:
    return str(e)`
}

// daemonCPU is the CPU time the daemon process has used so far (utime +
// stime of /proc/<pid>/stat, in clock ticks of 1/100 s).
func daemonCPU(t *testing.T, d *daemon) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconvItoa(d.cmd.Process.Pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// expectBombRefused runs a call whose argument check would take 2^40 steps:
// the program gets a TypeError naming the function and saying the check was
// too costly, well within its wall clock, and the daemon's CPU from before the
// run to after a following run stays far below what the check would cost
// (the check did not go on in the background).
func expectBombRefused(t *testing.T, d *daemon, global, name, bindings string) {
	t.Helper()
	before := daemonCPU(t, d)
	r := d.run(prog(bombCall(global, name), bindings, `"limits":{"maxWallMs":20000}`))
	if r.Error != nil {
		t.Fatalf("run failed: %+v", *r.Error)
	}
	var msg string
	if err := json.Unmarshal(r.Value, &msg); err != nil || !strings.HasPrefix(msg, global+"."+name+"(): invalid arguments: (root): too costly to check") {
		t.Fatalf("value %s, want the TypeError of a check too costly", r.Value)
	}
	expectOK(t, d.run(prog(`return 1`)), `1`)
	if used := daemonCPU(t, d) - before; used > 20*time.Second {
		t.Errorf("the daemon used %v of CPU for a refused check and a return 1", used)
	}
}

// A client-declared typed binding whose parameters schema can blow up: the
// check is refused as too costly before the library runs, the host never sees
// the call, and the same function still checks and forwards ordinary values.
func TestTypedC620CheckTooCostlyRefused(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	d.behave("bomb", constant(`"called"`))
	bindings := typedTools(`{"name":"bomb","parameters":` + bombParams + `}`)
	expectBombRefused(t, d, "tools", "bomb", bindings)
	if n := d.bindingCalls("bomb"); n != 0 {
		t.Errorf("the host saw %d calls of bomb, want 0", n)
	}
	expectOK(t, d.run(prog(`return await tools.bomb(x=[["a"], []])`, bindings)), `"called"`)
}

// A key repeated in a call's arguments is refused before the host: the check
// would read the last value and a receiver may read the first. The program
// forges the frames (its own calls cannot repeat a key): call 0 repeats
// "path", call 1 is honest; frames are judged in order, so once the host has
// seen call 1 it would have seen call 0 too. The run then ends at its wall clock.
func TestTypedC622DuplicateArgumentKeysRefused(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	fn := `{"name":"open","parameters":{"type":"object","properties":{"path":{"type":"string","pattern":"^/safe/"}},"additionalProperties":false}}`
	id := d.request("run", prog(`import os, time
os.write(3, b'{"type":"call","id":0,"global":"tools","name":"open","args":{"path":"/etc/passwd","path":"/safe/x"}}\n'
            b'{"type":"call","id":1,"global":"tools","name":"open","args":{"path":"/safe/z"}}\n')
while True:
    time.sleep(0.05)`, typedTools(fn), `"limits":{"maxWallMs":3000}`))
	argsSeen := func() []string {
		var seen []string
		for _, e := range d.snapshot() {
			var p callParams
			if e.m.Method == "binding/call" && json.Unmarshal(e.m.Params, &p) == nil {
				seen = append(seen, string(p.Args))
			}
		}
		return seen
	}
	waitFor(t, func() bool { return strings.Contains(strings.Join(argsSeen(), " "), "/safe/z") }, "the honest call at the host")
	if seen := argsSeen(); len(seen) != 1 {
		t.Errorf("the host saw %q, want only the honest call", seen)
	}
	if r := d.result(d.wait(id)); r.Error == nil || r.Error.Kind != "timeout" {
		t.Errorf("run ended %+v, want its wall clock", r.Error)
	}
}
