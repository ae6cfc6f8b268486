// Package archtest pins the one-way import graph of CONTRIBUTING.md, in the
// manner of the Go tree's go/build/deps_test.go: a new import that breaks the
// direction fails here, not in review.
package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/coderun-rpc/coderun-rpc/"

// allowed lists, per package, the non-standard imports it may have. Anything
// outside the module or the chosen dependencies is refused as well.
var allowed = map[string][]string{
	"protocol":                 {},
	"wireguard":                {"protocol", "github.com/segmentio/asm/base64"},
	"py":                       {},
	"child/internal/spawn":     {xsys},
	"child":                    {"child/internal/spawn", xsys},
	"child/sandbox":            {"child", "child/forkserver", "child/internal/spawn", "child/rundir", "child/sandbox/leaninit", xsys},
	"child/sandbox/leaninit":   {},
	"cmd/coderun-sandbox-init": {"child/reexec"},
	"child/rundir":             {"child/internal/spawn", xsys},
	"child/watchdog":           {"child/internal/spawn", "child/rundir", xsys},
	"child/forkserver":         {"child", "child/internal/spawn", xsys},
	"child/reexec":             {"child/sandbox", "child/watchdog"},
	"child/internal/childtest": {"child", "child/internal/spawn", "internal/leakcheck", xsys},
	"internal/leakcheck":       {},
	"internal/archtest":        {},
	"internal/doccheck":        {},
	"internal/buildinfo":       {},
	"internal/wheeltest":       {},
	"wheelset":                 {},
	// --check drives the daemon from outside through the public client.
	"internal/selfcheck": {"clients/go", "github.com/sourcegraph/jsonrpc2"},
	// The public Go client: jsonrpc2 for the conversation and the
	// protocol's constants, never the daemon's rpc or session.
	"clients/go": {"protocol", "github.com/sourcegraph/jsonrpc2", "github.com/gorilla/websocket", "github.com/google/jsonschema-go/jsonschema"},
	// Typed bindings: schemas compiled and cached, checks, stubs.
	"typed":   {"protocol", "wireguard", "github.com/santhosh-tekuri/jsonschema/v6"},
	"session": {"wheelset", "child", "child/sandbox", "child/forkserver", "child/rundir", "wireguard", "py", "protocol", "typed", "egress"},
	"config":  {"wheelset", "child", "child/forkserver", "child/sandbox", "protocol", "egress", "github.com/kelseyhightower/envconfig"},
	// What the front ends share: params tables and validation, stubs, the
	// result encoder and the JSON-RPC envelope, the Runner they drive.
	"wire":            {"wheelset", "session", "wireguard", "protocol", "typed", "mcp/upstream", "egress"},
	"rpc":             {"wire", "wheelset", "session", "wireguard", "protocol", "typed", "mcp/upstream", "egress"},
	"cmd/coderun-rpc": {"wheelset", "config", "rpc", "wire", "session", "protocol", "child/reexec", "child/rundir", "child/sandbox", "child/watchdog", "internal/selfcheck", "internal/buildinfo", "egress", "mcp", "mcp/upstream", "serve", "tracing"},
	// MCP: upstream servers as bindings (a client of each), and the code-mode server.
	"mcp/upstream":     {"session", "protocol", "typed", "wireguard", sdk, sdkJSONRPC},
	"mcp":              {"wheelset", "wire", "session", "protocol", "mcp/upstream", "egress", sdk, sdkJSONRPC},
	"internal/mcptest": {sdk},
	// Service mode: listeners (capped by x/net's limit listener), auth, per-connection servers, admin, metrics.
	"serve": {"wire", "session", "protocol", "tracing", "github.com/gorilla/websocket", "github.com/prometheus/client_golang", "golang.org/x/net/netutil"},
	// Egress: the policy and the forward proxy that enforces it (x/net's
	// header-field rules check the secrets' names and values).
	"egress": {"protocol", "golang.org/x/net/netutil", "golang.org/x/net/http/httpguts"},
	// OpenTelemetry spans for runs, child starts and binding calls.
	"tracing": {"wire", "session", "protocol", "go.opentelemetry.io/otel"},
}

// frontEnds are the daemon's surfaces: JSON-RPC on stdio (rpc), the MCP
// code-mode server (mcp) and service mode (serve). They are siblings over
// package wire; only main puts them together.
var frontEnds = []string{"rpc", "mcp", "serve"}

// xsys is imported under child/ only: the process supervisor is the one
// place that talks to the kernel below the standard library.
const xsys = "golang.org/x/sys/unix"

// sdk is the official MCP Go SDK, imported by the MCP packages only.
const (
	sdk        = "github.com/modelcontextprotocol/go-sdk/mcp"
	sdkJSONRPC = "github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		rules, known := allowed[pkg]
		if !known {
			if strings.HasPrefix(pkg, "e2e") || strings.HasPrefix(pkg, "bench") || strings.HasPrefix(pkg, "examples") {
				continue // test-only and tooling packages sit above everything
			}
			t.Errorf("package %s is not in the import table; add it deliberately", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if isStd(imp) {
				continue
			}
			if !permitted(rules, imp) {
				t.Errorf("%s imports %s, which breaks the one-way flow", pkg, imp)
			}
		}
	}
}

// TestConfigOnlyInMain keeps the table honest: configuration reaches the
// rest of the daemon as plain values main builds, so no package but main may
// be allowed to import config (rpc did once).
func TestConfigOnlyInMain(t *testing.T) {
	for pkg, rules := range allowed {
		if pkg != "cmd/coderun-rpc" && permitted(rules, module+"config") {
			t.Errorf("%s may import config; only cmd/coderun-rpc may", pkg)
		}
	}
}

// C1113: no front end depends on another, directly or
// through any package between them (the table alone would let one reach
// another through a third).
func TestC1113FrontEndsAreSiblings(t *testing.T) {
	for _, fe := range frontEnds {
		out, err := exec.Command("go", "list", "-deps", module+fe).Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, other := range frontEnds {
				if other != fe && dep == module+other {
					t.Errorf("front end %s depends on front end %s; share through package wire instead", fe, other)
				}
			}
		}
	}
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func permitted(rules []string, imp string) bool {
	for _, r := range rules {
		if imp == r || imp == module+r || strings.HasPrefix(imp, r+"/") {
			return true
		}
	}
	return false
}

// TestLeanSandboxInit keeps the daemon's helper binary lean: it starts once
// per sandboxed run (and as each daemon's watchdog), and every package it
// links runs its initialisation then (docs/performance.md §11). Beyond the standard library it may link
// the process supervisor and golang.org/x/sys only, and of the standard
// library none of the trees below, whose initialisation it does not need.
func TestLeanSandboxInit(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"cmd/coderun-sandbox-init").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lean := []string{"child", "cmd/coderun-sandbox-init", xsys}
	heavy := []string{"crypto", "debug", "compress", "math/big", "encoding/json"}
	for _, dep := range strings.Fields(string(out)) {
		if !isStd(dep) && !permitted(lean, strings.TrimPrefix(dep, module)) || isStd(dep) && permitted(heavy, dep) {
			t.Errorf("cmd/coderun-sandbox-init links %s", dep)
		}
	}
}
