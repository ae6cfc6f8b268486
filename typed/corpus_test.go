package typed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// corpus is a set of modules (each a list of globals and entries) meant to
// stress the renderer: names that collide, keys that are not identifiers,
// recursion, defaults that do not fit, text that could break the file.
var corpus = [][]any{
	{"tools", []string{`"lookup"`, `{"name":"search","description":"Search.","parameters":{"type":"object","properties":{"q":{"type":"string"},"k":{"type":"integer","default":5}},"required":["q"]},"returns":{"type":"array","items":{"type":"string"}}}`}},
	{"web_api", []string{`{"name":"get","parameters":{"type":"object","properties":{"url":{"type":"string","format":"uri"},"headers":{"type":"object","additionalProperties":{"type":"string"},"default":{"a":"b"}},"retry":{"type":["integer","null"],"default":null}},"required":["url"]},"returns":{"type":"object","properties":{"status":{"type":"integer"},"body":{"type":"string"},"headers":{"type":"object","additionalProperties":{"type":"string"}}},"required":["status"]}}`},
		"webApi", []string{`"other"`}},
	{"tools", []string{`{"name":"tree","returns":{"$defs":{"node":{"type":"object","title":"Tools","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}},"v":{"$ref":"#/$defs/val"}},"required":["v"]},"val":{"anyOf":[{"type":"string"},{"type":"number"},{"type":"null"}]}},"$ref":"#/$defs/node"}}`,
		`{"name":"tree2","returns":{"title":"Any","type":"object","properties":{"None":{"type":"boolean"},"class":{"type":"string"},"str":{"type":"integer"}}}}`}},
	{"ns", []string{`{"name":"class","description":"a keyword name"}`, `{"name":"my-tool","description":"x\"\"\"\ny\\","parameters":{"type":"object","properties":{"from":{"type":"string"},"max-results":{"type":"integer","default":3},"ok":{"type":"boolean","default":false},"kwargs":{"type":"string"},"kwargs_":{}}}}`,
		`{"name":"kw","parameters":{"type":"object","properties":{"kwargs":{"type":"string"},"a-b":{},"self":{"type":"integer"}},"required":["self"]}}`,
		`{"name":"esc","description":"ends with a quote\"","parameters":{"type":"object","properties":{"mode":{"enum":["a\"b","c\\d","\u2028","é"],"default":"é"},"n":{"const":"fixed"},"mixed":{"enum":[1,"a"]}}}}`,
		`{"name":"ctl","description":"\u0000\u0007\r\n\t\u001b[0m end","returns":{"type":"string","description":"\"\"\""}}`}},
	{"d7", []string{`{"name":"legacy","parameters":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"pt":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},"properties":{"at":{"$ref":"#/definitions/pt"},"path":{"type":"array","items":{"$ref":"#/definitions/pt"}},"n":{"type":"number","default":1},"big":{"type":"integer","default":123456789012345678901234567890},"f":{"type":"integer","default":1.0}},"required":["at"]},"returns":{"allOf":[{"type":"string"}]}}`}},
	{"deep", []string{`{"name":"nest","parameters":{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"array","items":{"type":"array","items":{"type":"object","properties":{"d":{"type":"string"}}}}}}}}},"list":{"type":"array","items":{"type":"object","properties":{"e":{"type":"integer"}}}},"o":{"type":"object","default":{"k":[1,{"z":null}]}}}}}`,
		`{"name":"nest2","parameters":{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}}}}}`}},
}

// corpusStubs renders every corpus module.
func corpusStubs(t testing.TB) []string {
	var out []string
	for _, m := range corpus {
		out = append(out, Render(testLimits, "3.10", namespaces(t, m...)).Text)
	}
	return out
}

func TestCorpusParses(t *testing.T) {
	c := testASTChecker(t)
	for i, text := range corpusStubs(t) {
		if err := c.parse(text); err != nil {
			t.Errorf("module %d does not parse: %v\n%s", i, err, text)
		}
	}
}

// TestCorpusTypeChecks runs mypy --strict on each module as a .pyi, with the
// project's .venv (make deps). Without it the test skips, except under CI.
func TestCorpusTypeChecks(t *testing.T) {
	leakcheck.Check(t)
	python, err := filepath.Abs("../.venv/bin/python")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(python); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no .venv for mypy under CI: %v", err)
		}
		t.Skip("no .venv (make deps); mypy not run")
	}
	dir := t.TempDir()
	var files []string
	for i, text := range corpusStubs(t) {
		name := filepath.Join(dir, fmt.Sprintf("stub%d.pyi", i))
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
	}
	args := append([]string{"-m", "mypy", "--strict", "--python-version", "3.10", "--no-incremental", "--cache-dir", filepath.Join(dir, "cache")}, files...)
	out, err := exec.Command(python, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("mypy --strict: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Success") {
		t.Fatalf("mypy said:\n%s", out)
	}
}
