package wire

import (
	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// param is one member of a method's params: its name, whether it must be
// present, a summary and a JSON Schema for rpc.discover, and the check that
// reads it into the method's decoded params P. validateParams finds every
// row's member in one pass over the params and hands each check its own: m
// is the member called name (the last one when the name repeats, as
// JSON.parse keeps), nil when absent. A method's checks run in table order
// and stop at the first failure, so the order of the rows is the order of
// docs/protocol.md §3.4; a row sees what the rows above it decoded (files
// reads the run's maxFileBytes). Adding a member is adding a row.
//
// A row without a check documents a member the daemon accepts and does not
// read (initialize's clientInfo).
type param[P any] struct {
	name     string
	required bool
	summary  string
	schema   string // JSON Schema, as text; "#/components/schemas/…" refers to openRPCSchemas
	check    func(m *wireguard.Member, p *P, v validation) error
}

// validation is what checks compare against: the daemon's configuration.
type validation struct {
	limits   protocol.Limits    // the configured caps a run's limits may only tighten
	idleMax  int64              // CODERUN_SESSION_IDLE_MS
	packages wheelset.AllowList // CODERUN_PACKAGES
	egress   *egress.Policy     // CODERUN_EGRESS (nil: none, and a run's "egress" is refused)
}

// validateParams checks raw, a method's params, against its rows in order.
func validateParams[P any](raw []byte, rows []param[P], v validation) (P, error) {
	var p P
	ms, err := wireguard.Members(raw, wireguard.Strict) // the one validating scan
	if err != nil {
		return p, reject("params must be an object")
	}
	names := make([]string, len(rows))
	for i, row := range rows {
		names[i] = row.name
	}
	given := lastOf(ms, names...)
	for i, row := range rows {
		if row.check == nil {
			continue
		}
		if err := row.check(given[i], &p, v); err != nil {
			return p, err
		}
	}
	return p, nil
}

// runParams are run's params (docs/protocol.md §3.1, §3.4; protocol-sessions.md §11.1; protocol-files.md §12.1).
var runParams = []param[protocol.RunParams]{
	{name: "program", required: true, summary: "the body of an async Python function: top-level await and return work",
		schema: `{"type":"string"}`,
		check: func(m *wireguard.Member, p *protocol.RunParams, _ validation) error {
			s, ok := wireguard.DecodeString(value(m))
			if !ok {
				return reject("program must be a string")
			}
			p.Program = s
			return nil
		}},
	{name: "bindings", summary: "the program's globals, each host functions or an upstream MCP server; absent or null = []",
		schema: `{"type":["array","null"],"items":{"$ref":"#/components/schemas/Binding"}}`,
		check: func(m *wireguard.Member, p *protocol.RunParams, _ validation) (err error) {
			p.Bindings, err = validateBindings(m)
			return err
		}},
	{name: "limits", summary: "per-run budgets; each may only tighten the daemon's configuration",
		schema: `{"oneOf":[{"$ref":"#/components/schemas/Limits"},{"type":"null"}]}`,
		check: func(m *wireguard.Member, p *protocol.RunParams, v validation) (err error) {
			p.Limits, err = optionalLimits(m, v.limits)
			return err
		}},
	{name: "egress", summary: "the hosts this run may reach through the egress proxy: entries of the daemon's policy, which it may only narrow",
		schema: `{"type":["array","null"],"items":{"type":"string"}}`,
		check: func(m *wireguard.Member, p *protocol.RunParams, v validation) (err error) {
			p.Egress, err = optionalEgress(m, v.egress)
			return err
		}},
	{name: "stream", summary: "true: run/log and run/output notifications before the response",
		schema: `{"type":["boolean","null"]}`,
		check: func(m *wireguard.Member, p *protocol.RunParams, _ validation) error {
			if m == nil {
				return nil
			}
			switch wireguard.KindOf(m.Value) {
			case wireguard.KindNull, wireguard.KindFalse:
			case wireguard.KindTrue:
				p.Stream = true
			default:
				return reject("stream must be a boolean")
			}
			return nil
		}},
	{name: "files", summary: "files written into the working directory before the program starts",
		schema: `{"type":["array","null"],"maxItems":10000,"items":{"$ref":"#/components/schemas/InputFile"}}`,
		check: func(m *wireguard.Member, p *protocol.RunParams, v validation) (err error) {
			p.Files, err = validateFiles(m, effective(p.Limits.MaxFileBytes, v.limits.MaxFileBytes))
			return err
		}},
	{name: "sessionId", summary: "run in this persistent session (limits.addressSpaceMb is then refused)",
		schema: `{"type":["string","null"],"minLength":1}`,
		check: func(m *wireguard.Member, p *protocol.RunParams, _ validation) (err error) {
			if p.SessionID, err = sessionID(m, false); err != nil {
				return err
			}
			if p.SessionID != "" && p.Limits.AddressSpaceMb != 0 {
				return reject("limits.addressSpaceMb is fixed for the session's lifetime")
			}
			return nil
		}},
	{name: "secrets", summary: "credentials the egress proxy adds to this run's requests to their hosts (within the run's egress); the program sees only placeholders",
		schema: `{"type":["array","null"],"maxItems":64,"items":{"$ref":"#/components/schemas/Secret"}}`,
		check: func(m *wireguard.Member, p *protocol.RunParams, v validation) (err error) {
			if given(m) && p.SessionID != "" {
				return reject("secrets are given to session/open for every run of the session")
			}
			p.Egress, err = optionalSecrets(m, p.Egress, v.egress)
			return err
		}},
	{name: "packages", summary: "packages the daemon installs before the program starts, within CODERUN_PACKAGES (docs/packages.md); a session takes them at session/open",
		schema: packagesSchema,
		check: func(m *wireguard.Member, p *protocol.RunParams, v validation) (err error) {
			if p.Packages, err = validatePackages(m, v.packages); err != nil {
				return err
			}
			if p.SessionID != "" && p.Packages != nil {
				return reject("packages are given to session/open for every run of the session")
			}
			return nil
		}},
	{name: "traceparent", summary: "the W3C trace context of the caller's span",
		schema: `{"type":["string","null"],"pattern":"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"}`,
		check: func(m *wireguard.Member, p *protocol.RunParams, _ validation) (err error) {
			p.Traceparent, err = optionalTraceparent(m)
			return err
		}},
}

// describeRows are bindings/describe's: run's rows for bindings, limits,
// egress and packages, in run's order, with run's messages
// (docs/protocol-typed.md §10.4).
var describeRows = pickParams(runParams, "bindings", "limits", "egress", "packages")

// packagesSchema is the schema of a "packages" member (docs/packages.md).
const packagesSchema = `{"type":["array","null"],"maxItems":64,"items":{"type":"string"}}`

// sessionOpenParams are session/open's (docs/protocol-sessions.md §11.1).
var sessionOpenParams = []param[protocol.SessionParams]{
	{name: "limits", summary: "the defaults of the session's runs; addressSpaceMb is fixed for the session's life",
		schema: `{"oneOf":[{"$ref":"#/components/schemas/Limits"},{"type":"null"}]}`,
		check: func(m *wireguard.Member, p *protocol.SessionParams, v validation) (err error) {
			p.Limits, err = optionalLimits(m, v.limits)
			return err
		}},
	{name: "packages", summary: "packages installed before the session's child boots, for every run of the session and its forks (docs/packages.md)",
		schema: packagesSchema,
		check: func(m *wireguard.Member, p *protocol.SessionParams, v validation) (err error) {
			p.Packages, err = validatePackages(m, v.packages)
			return err
		}},
	{name: "secrets", summary: "credentials the egress proxy adds to every run of the session (within the daemon's egress), beside the daemon's; the program sees only placeholders",
		schema: `{"type":["array","null"],"maxItems":64,"items":{"$ref":"#/components/schemas/Secret"}}`,
		check: func(m *wireguard.Member, p *protocol.SessionParams, v validation) (err error) {
			p.Egress, err = optionalSecrets(m, nil, v.egress)
			return err
		}},
	{name: "idleTimeoutMs", summary: "end the session after this long without a run; at most CODERUN_SESSION_IDLE_MS",
		schema: `{"type":["integer","null"],"minimum":1}`,
		check: func(m *wireguard.Member, p *protocol.SessionParams, v validation) (err error) {
			p.IdleTimeoutMs, err = idleTimeout(m, v.idleMax)
			return err
		}},
}

// sessionRefParams are session/fork's and session/close's.
var sessionRefParams = []param[string]{
	{name: "sessionId", required: true, summary: "a session id issued by session/open or session/fork",
		schema: `{"type":"string","minLength":1}`,
		check: func(m *wireguard.Member, id *string, _ validation) (err error) {
			*id, err = sessionID(m, true)
			return err
		}},
}

// initializeParams are accepted and not otherwise checked (docs/protocol.md
// §2.6); initialize checks only that params are absent, null or an object.
var initializeParams = []param[struct{}]{
	{name: "clientInfo", summary: "the client's name and version, for the daemon's log",
		schema: `{"type":"object","properties":{"name":{"type":"string"},"version":{"type":"string"}}}`},
	{name: "capabilities", summary: "accepted and ignored", schema: `{"type":"object"}`},
}

// cancelParams are $/cancelRequest's, either direction (docs/protocol.md
// §4.3): an id that names no live run or call is ignored.
var cancelParams = []param[struct{}]{
	{name: "id", required: true, summary: "the request id of the run (client → daemon) or binding/call (daemon → client)",
		schema: `{"type":["integer","string"]}`},
}

// pickParams is the rows of rows named names, in rows' order.
func pickParams[P any](rows []param[P], names ...string) []param[P] {
	var out []param[P]
	for _, row := range rows {
		for _, n := range names {
			if row.name == n {
				out = append(out, row)
			}
		}
	}
	return out
}
