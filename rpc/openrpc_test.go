package rpc

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wire"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

var updateOpenRPC = flag.Bool("update-openrpc", false, "rewrite docs/openrpc.json from the methods table")

const openRPCFile = "../docs/openrpc.json"

// C901: docs/openrpc.json is the document rpc.discover answers; it goes stale
// when a table changes and the file is not regenerated.
func TestC901OpenRPCFileCurrent(t *testing.T) {
	if *updateOpenRPC {
		if err := os.WriteFile(openRPCFile, OpenRPC(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(openRPCFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, OpenRPC()) {
		t.Fatalf("%s is stale: go test ./rpc -run TestC901OpenRPCFileCurrent -update-openrpc", openRPCFile)
	}
}

// compile adds the document under doc.json and compiles the schema at
// pointer inside it (its $refs resolve against the document).
func compileIn(t *testing.T, c *jsonschema.Compiler, pointer string) *jsonschema.Schema {
	t.Helper()
	s, err := c.Compile("doc.json#" + pointer)
	if err != nil {
		t.Fatalf("schema at %s: %v", pointer, err)
	}
	return s
}

func documentCompiler(t *testing.T) *jsonschema.Compiler {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(OpenRPC()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("doc.json", doc); err != nil {
		t.Fatal(err)
	}
	return c
}

// C902: the document is valid against the OpenRPC 1.3 meta-schema (vendored
// in testdata/openrpc), and every schema in it, params, results and
// components, compiles as JSON Schema 2020-12 with its references resolved.
func TestC902OpenRPCMetaSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7) // both meta-schemas are written in draft-07
	for url, file := range map[string]string{
		"https://meta.open-rpc.org/": "meta-schema.json",
		// The schema of its JSONSchema, which it refers to with and without the slash.
		"https://meta.json-schema.tools":  "json-schema-tools-meta-schema.json",
		"https://meta.json-schema.tools/": "json-schema-tools-meta-schema.json",
	} {
		f, err := os.Open("testdata/openrpc/" + file)
		if err != nil {
			t.Fatal(err)
		}
		meta, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		m := meta.(map[string]any)
		delete(m, "$schema") // json-schema.tools' own dialect URL, which is draft-07
		delete(m, "$id")     // registered under url instead
		if err := c.AddResource(url, meta); err != nil {
			t.Fatal(err)
		}
	}
	schema, err := c.Compile("https://meta.open-rpc.org/")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(OpenRPC()))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(inst); err != nil {
		t.Fatalf("the document is not OpenRPC: %v", err)
	}

	var doc openRPCDocument
	if err := json.Unmarshal(OpenRPC(), &doc); err != nil {
		t.Fatal(err)
	}
	dc := documentCompiler(t)
	for name := range doc.Comps.Schemas {
		compileIn(t, dc, "/components/schemas/"+name)
	}
	for i, m := range doc.Methods {
		for j := range m.Params {
			compileIn(t, dc, fmt.Sprintf("/methods/%d/params/%d/schema", i, j))
		}
		if m.Result != nil {
			compileIn(t, dc, fmt.Sprintf("/methods/%d/result/schema", i))
		}
	}
	if doc.OpenRPC != "1.3.2" {
		t.Errorf("openrpc %q", doc.OpenRPC)
	}
}

// paramsSchema is a method's params as one object schema: its descriptors'
// schemas as properties, the required ones required.
func paramsSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	var doc openRPCDocument
	if err := json.Unmarshal(OpenRPC(), &doc); err != nil {
		t.Fatal(err)
	}
	for i, m := range doc.Methods {
		if m.Name != name || m.From != fromClient {
			continue
		}
		props, req := []string{}, []string{}
		for j, p := range m.Params {
			props = append(props, fmt.Sprintf(`%q:{"$ref":"doc.json#/methods/%d/params/%d/schema"}`, p.Name, i, j))
			if p.Required {
				req = append(req, fmt.Sprintf("%q", p.Name))
			}
		}
		text := `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `]}`
		c := documentCompiler(t)
		s, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("params.json", s); err != nil {
			t.Fatal(err)
		}
		return compileIn2(t, c, "params.json")
	}
	t.Fatalf("no method %s", name)
	return nil
}

func compileIn2(t *testing.T, c *jsonschema.Compiler, url string) *jsonschema.Schema {
	t.Helper()
	s, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// C903: the document says what the validator does: params the daemon accepts
// are valid against the documented params schemas, a type the validator
// refuses for each run member is invalid against its schema too, and the run
// results the encoder writes are valid against RunResult.
func TestC903OpenRPCMatchesValidation(t *testing.T) {
	run := paramsSchema(t, protocol.MethodRun)
	accepted := []string{
		`{"program":"","bindings":null,"limits":null,"stream":null,"extra":1}`,
		`{"program":"","bindings":[{"global":"tools","functions":["__proto__","my-tool",""],"errorClass":null,"x":1}]}`,
		`{"program":"","bindings":` + tools(`[{"name":"my-tool","description":"d","parameters":{"type":"object"},"returns":true},"b"]`) + `}`,
		`{"program":"","limits":{"maxWallMs":1000,"cpuSeconds":1e1,"maxValueBytes":1000.0,"maxLogBytes":64,"addressSpaceMb":512}}`,
		`{"program":"","files":[{"path":"a/b.txt","text":"x"},{"path":"c","base64":"AA=="}],"stream":true,"sessionId":"session-X",
		  "traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`,
	}
	limits := cfgLimits
	limits.MaxFileBytes = 1 << 20
	for _, p := range accepted {
		if _, err := wire.ValidateRun([]byte(p), limits, noPackages); err != nil {
			t.Errorf("the daemon refuses %s: %v", p, err)
		}
		if err := validate(run, p); err != nil {
			t.Errorf("the document refuses %s: %v", p, err)
		}
	}
	for _, row := range wire.Params[protocol.MethodRun] {
		bad := map[string]string{"program": `1`, "bindings": `{}`, "limits": `[]`, "stream": `"yes"`,
			"files": `{}`, "sessionId": `7`, "traceparent": `"00-xyz"`, "egress": `{}`, "secrets": `{}`, "packages": `{}`}[row.Name]
		if bad == "" {
			t.Errorf("run member %s has no refused example here: add one", row.Name)
			continue
		}
		p := `{"program":"",` + string(wireguard.AppendString(nil, row.Name)) + `:` + bad + `}`
		if row.Name == "program" {
			p = `{"program":1}`
		}
		if _, err := wire.ValidateRun([]byte(p), cfgLimits, noPackages); err == nil {
			t.Errorf("the daemon accepts %s", p)
		}
		if err := validate(run, p); err == nil {
			t.Errorf("the document accepts %s", p)
		}
	}
	dc := documentCompiler(t)
	result := compileIn(t, dc, "/components/schemas/RunResult")
	line, exit := int64(3), 9
	for _, r := range []protocol.Result{
		{Value: []byte(`{"a":[1,2]}`), Logs: []string{"x"}, Stats: protocol.Stats{WallMs: 3}},
		{Logs: []string{}, Error: &protocol.RunError{Kind: protocol.KindException, Message: "m", Line: &line}},
		{Logs: []string{}, Error: &protocol.RunError{Kind: protocol.KindWorkerExit, Message: "m", ExitCode: &exit, Signal: "SIGKILL"},
			Session: &protocol.SessionInfo{ID: "session-X", Alive: false, Runs: 2, Reason: "lost"}},
	} {
		if err := validate(result, string(wire.RunResultJSON(r))); err != nil {
			t.Errorf("%s: %v", wire.RunResultJSON(r), err)
		}
	}
}

func validate(s *jsonschema.Schema, text string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// C904: the server answers exactly the requests the document names: each
// client → daemon request of the table is served (never −32601), a name that
// is not in the table is −32601, and rpc.discover answers the document.
func TestC904ServedMethodsAreDescribed(t *testing.T) {
	h := start(t)
	h.init()
	id := 1
	for _, m := range methods {
		if m.from == fromDaemon || m.notification || m.name == protocol.MethodInitialize || m.name == protocol.MethodShutdown || m.sessions {
			continue // initialize is answered above; shutdown ends the harness; sessions are off here
		}
		id++
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%s,"params":{}}`, id, quote(m.name)))
		got := h.recv()
		if strings.Contains(got, fmt.Sprintf(`"code":%d`, protocol.CodeMethodNotFound)) {
			t.Errorf("%s is in the document and not served: %s", m.name, got)
		}
		if m.name == protocol.MethodDiscover {
			want, _ := json.Marshal(json.RawMessage(OpenRPC()))
			if got != `{"jsonrpc":"2.0","id":`+fmt.Sprint(id)+`,"result":`+string(want)+`}` {
				t.Errorf("rpc.discover answered %.200s…", got)
			}
		}
	}
	for _, name := range []string{"rpc.discovery", "session/open", "binding/call", "run/log"} {
		id++
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%s}`, id, quote(name)))
		h.expect(errResp(fmt.Sprint(id), protocol.CodeMethodNotFound, "method not found: "+name))
	}
}

// C913: docs/protocol.md names every method of the table in §2.4's table.
// (The members of each method's params are tables generated from the rows:
// C1110.)
func TestC913ProtocolDocsNameTheTables(t *testing.T) {
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, m := range methods {
		if !strings.Contains(doc, "| `"+m.name+"` |") {
			t.Errorf("method %s is not in docs/protocol.md §2.4", m.name)
		}
	}
}
