package rpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// openRPCVersion is the version of the OpenRPC specification the document
// follows; surfaceVersion is the version of this JSON-RPC surface, raised
// when a method or a member changes in a way a client notices.
const (
	openRPCVersion = "1.3.2"
	surfaceVersion = "1.0.0"
)

// errorMessages says, per error code, what the daemon answers it for
// (docs/protocol.md §8).
var errorMessages = map[int]string{
	protocol.CodeParseError:     "the body is not JSON, or its header block cannot be read",
	protocol.CodeInvalidRequest: "not a request; an id in use or of an unsupported type; a second initialize; any request after shutdown",
	protocol.CodeMethodNotFound: "an unknown request method",
	protocol.CodeInvalidParams:  "invalid params; the message names the member and the rule (docs/protocol.md §3.4)",
	protocol.CodeQueueFull:      "run queue is full",
	protocol.CodeNotInitialized: "server not initialized: a request before initialize",
	protocol.CodeSessionCap:     "session cap reached",
	protocol.CodeUnknownSession: "a session id that is not open; data is {sessionId, state, reason?}",
	protocol.CodeInternalError:  "an MCP server named by a binding could not be reached; a session child that could not be booted or forked",
}

// openRPCSchemas are the document's shared schemas, by name.
func openRPCSchemas() map[string]json.RawMessage {
	kinds, _ := json.Marshal([]string{protocol.KindException, protocol.KindTimeout, protocol.KindAbort,
		protocol.KindWorkerExit, protocol.KindInvalidOutput, protocol.KindOutputLimit})
	s := map[string]string{
		"Binding": `{"type":"object","required":["global"],
			"properties":{"global":{"type":"string","pattern":"^[A-Za-z_][A-Za-z0-9_]*$"},
				"functions":{"type":"array","items":{"oneOf":[{"type":"string"},{"$ref":"#/components/schemas/TypedFunction"}]}},
				"errorClass":{"oneOf":[{"$ref":"#/components/schemas/ErrorClass"},{"type":"null"}]},
				"mcp":{"type":"string","minLength":1}},
			"oneOf":[{"required":["functions"]},{"required":["mcp"]}]}`,
		"TypedFunction": `{"type":"object","required":["name"],"additionalProperties":false,
			"properties":{"name":{"type":"string","minLength":1},"description":{"type":"string"},
				"parameters":{"type":"object","description":"a JSON Schema 2020-12 (or draft-07) object schema"},
				"returns":{"type":["object","boolean"],"description":"a JSON Schema 2020-12 (or draft-07)"}}}`,
		"ErrorClass": `{"type":"object","required":["name","memberNameProperty"],
			"properties":{"name":{"type":"string","pattern":"^[A-Za-z_][A-Za-z0-9_]*$"},"memberNameProperty":{"type":"string","minLength":1}}}`,
		"Limits": limitsSchema(),
		"InputFile": `{"type":"object","required":["path"],
			"properties":{"path":{"type":"string","minLength":1,"maxLength":4095},"text":{"type":"string"},"base64":{"type":"string","contentEncoding":"base64"}},
			"oneOf":[{"required":["text"]},{"required":["base64"]}]}`,
		"Secret": `{"type":"object","required":["hosts","value"],"additionalProperties":false,
			"properties":{"hosts":{"type":"array","minItems":1,"maxItems":64,"items":{"type":"string"}},
				"header":{"type":"string","minLength":1,"maxLength":64},"query":{"type":"string","minLength":1,"maxLength":64},
				"env":{"type":"string","pattern":"^[A-Z_][A-Z0-9_]{0,63}$"},"value":{"type":"string","minLength":1,"maxLength":8192}},
			"oneOf":[{"required":["header"]},{"required":["query"]},{"required":["env"]}]}`,
		"RunResult": `{"type":"object","required":["logs","stats"],
			"properties":{"value":{"description":"the program's value, lossless JSON; present exactly when error is absent"},
				"logs":{"type":"array","items":{"type":"string"}},
				"error":{"$ref":"#/components/schemas/RunError"},
				"stats":{"$ref":"#/components/schemas/Stats"},
				"outputs":{"type":"array","items":{"type":"object","required":["data"],"properties":{"data":{"$ref":"#/components/schemas/MimeBundle"}}}},
				"files":{"type":"array","items":{"$ref":"#/components/schemas/OutFile"}},
				"session":{"$ref":"#/components/schemas/SessionInfo"},
				"egress":{"type":"array","description":"with CODERUN_EGRESS: every request through the egress proxy, in arrival order",
					"items":{"type":"object","required":["host","port","method","status","bytes","ms"],
						"properties":{"host":{"type":"string"},"port":{"type":"integer"},"method":{"type":"string"},
							"status":{"type":"integer"},"bytes":{"type":"integer"},"ms":{"type":"integer"}}}}}}`,
		"RunError": `{"type":"object","required":["kind","message"],
			"properties":{"kind":{"enum":` + string(kinds) + `},"message":{"type":"string"},
				"exceptionType":{"type":"string"},"line":{"type":"integer","minimum":1},"path":{"type":"string"},"hint":{"type":"string"},
				"budget":{"enum":["` + protocol.BudgetCPU + `","` + protocol.BudgetWall + `"]},"exitCode":{"type":"integer"},"signal":{"type":"string"}}}`,
		"Stats": `{"type":"object","required":["wallMs","cpuMs","maxRssKb","queueMs","bindingCalls","logBytes"],
			"properties":{"wallMs":{"type":"integer"},"cpuMs":{"type":"integer"},"maxRssKb":{"type":"integer"},
				"queueMs":{"type":"integer"},"bindingCalls":{"type":"integer"},"logBytes":{"type":"integer"},
				"installMs":{"type":"integer","description":"only for a run that names packages"}}}`,
		"MimeBundle": `{"type":"object","additionalProperties":{"type":"string"}}`,
		"OutFile": `{"type":"object","required":["path","size"],
			"properties":{"path":{"type":"string"},"size":{"type":"integer","minimum":0},"base64":{"type":"string","contentEncoding":"base64"},"omitted":{"const":true}}}`,
		"SessionInfo": `{"type":"object","required":["id","alive","runs"],
			"properties":{"id":{"type":"string"},"alive":{"type":"boolean"},"runs":{"type":"integer","minimum":0},"reason":{"type":"string"}}}`,
		"SessionRef": `{"type":"object","required":["sessionId"],"properties":{"sessionId":{"type":"string"}}}`,
		"InitializeResult": `{"type":"object","required":["serverInfo","capabilities"],
			"properties":{"serverInfo":{"type":"object","required":["name","version"],"properties":{"name":{"const":"coderun-rpc"},"version":{"type":"string"}}},
				"capabilities":{"type":"object","required":["languages","isolation","isolationReason","logStreaming","limits","python","sessions"],
					"properties":{"languages":{"type":"array","items":{"type":"string"}},"isolation":{"enum":["process","sandbox"]},
						"isolationReason":{"type":"string"},"logStreaming":{"type":"boolean"},
						"limits":{"type":"object","additionalProperties":{"type":"integer"}},
						"python":{"type":"object","required":["executable","version"],"properties":{"executable":{"type":"string"},"version":{"type":"string"},
							"preload":{"type":"array","items":{"type":"string"}}}},
						"egress":{"type":"object","required":["allow","enforced","note"],
							"properties":{"allow":{"type":"array","items":{"type":"string"}},"enforced":{"type":"boolean"},"note":{"type":"string"}}},
						"sessions":{"type":"object","required":["max","idleTimeoutMs","fork"],
							"properties":{"max":{"type":"integer"},"idleTimeoutMs":{"type":"integer"},"fork":{"type":"boolean"}}}}}}}`,
	}
	out := make(map[string]json.RawMessage, len(s))
	for name, text := range s {
		out[name] = json.RawMessage(text)
	}
	return out
}

// limitsSchema is the per-run limits object: the names validateLimits
// reads, each a positive integer, nothing else.
func limitsSchema() string {
	var b strings.Builder
	b.WriteString(`{"type":"object","additionalProperties":false,"properties":{`)
	for i, name := range wire.LimitNames() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + name + `":{"type":"integer","minimum":1}`)
	}
	b.WriteString(`}}`)
	return b.String()
}

type openRPCDocument struct {
	OpenRPC string           `json:"openrpc"`
	Info    openRPCInfo      `json:"info"`
	Methods []openRPCMethod  `json:"methods"`
	Comps   openRPCComponent `json:"components"`
}

type openRPCInfo struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

type openRPCComponent struct {
	Schemas map[string]json.RawMessage `json:"schemas"`
}

type openRPCMethod struct {
	Name           string              `json:"name"`
	Summary        string              `json:"summary"`
	ParamStructure string              `json:"paramStructure"`
	Params         []openRPCDescriptor `json:"params"`
	Result         *openRPCDescriptor  `json:"result,omitempty"`
	Errors         []openRPCError      `json:"errors,omitempty"`
	From           string              `json:"x-from"`
	Notification   bool                `json:"x-notification,omitempty"`
	Sessions       bool                `json:"x-sessions,omitempty"`
}

type openRPCDescriptor struct {
	Name     string          `json:"name"`
	Summary  string          `json:"summary,omitempty"`
	Required bool            `json:"required,omitempty"`
	Schema   json.RawMessage `json:"schema"`
}

type openRPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// OpenRPC is the OpenRPC 1.3 document of this surface, as rpc.discover
// answers it and docs/openrpc.json holds it: generated from the methods
// table, whose params are the tables the server validates with.
func OpenRPC() []byte {
	openRPCOnce.Do(func() { openRPCText = buildOpenRPC() })
	return openRPCText
}

var (
	openRPCOnce sync.Once
	openRPCText []byte
)

func buildOpenRPC() []byte {
	doc := openRPCDocument{OpenRPC: openRPCVersion,
		Info: openRPCInfo{Title: "coderun-rpc", Version: surfaceVersion,
			Description: "Runs model-written Python under budgets; JSON-RPC 2.0 with LSP framing on stdio (docs/protocol.md). " +
				"x-from says who sends a method (client, daemon or either); x-notification marks a notification, " +
				"x-sessions a method served only while sessions are on."},
		Comps: openRPCComponent{Schemas: openRPCSchemas()}}
	for _, m := range methods {
		om := openRPCMethod{Name: m.name, Summary: m.summary, ParamStructure: "by-name", Params: []openRPCDescriptor{},
			From: m.from, Notification: m.notification, Sessions: m.sessions}
		for _, d := range m.params {
			om.Params = append(om.Params, openRPCDescriptor{Name: d.Name, Summary: d.Summary, Required: d.Required, Schema: json.RawMessage(d.Schema)})
		}
		if m.result != "" {
			om.Result = &openRPCDescriptor{Name: m.name + " result", Schema: json.RawMessage(m.result)}
		}
		for _, code := range m.errors {
			om.Errors = append(om.Errors, openRPCError{Code: code, Message: errorMessages[code]})
		}
		doc.Methods = append(doc.Methods, om)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		panic("rpc: the OpenRPC document does not encode: " + err.Error()) // a schema literal that is not JSON; TestOpenRPCMetaSchema names it
	}
	return b.Bytes()
}
