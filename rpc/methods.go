package rpc

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wire"
)

// method is one method of the JSON-RPC surface (docs/protocol.md §2.4), in
// either direction. The server answers the client → daemon requests of this
// table and no others (request), and rpc.discover's OpenRPC document is
// generated from it (openrpc.go), so a method is served exactly when it is
// described.
type method struct {
	name    string
	summary string
	// from is who sends it: fromClient, fromDaemon or fromEither.
	from string
	// notification: no id and no answer; result is "".
	notification bool
	params       []wire.Param // wire.Params for a client → daemon method
	result       string       // JSON Schema text of the result
	errors       []int        // the codes it may be answered with (errorMessages)
	// sessions: served only while sessions are on (docs/protocol.md §11).
	sessions bool
	// serve answers a client → daemon request from the read loop. nil for
	// initialize and rpc.discover, which request serves itself (the first
	// needs the lifecycle state; the second reads this table, which may not
	// refer to it).
	serve func(s *Server, id reqID, params []byte)
}

// Who sends a method, as rpc.discover's x-from says.
const (
	fromClient = "client"
	fromDaemon = "daemon"
	fromEither = "either"
)

// Error codes every request may meet, before its params are read.
var lifecycleErrors = []int{protocol.CodeInvalidRequest, protocol.CodeNotInitialized}

// methods is the surface. Its order is the document's.
var methods = []method{
	{name: protocol.MethodInitialize, from: fromClient, summary: "must come first; returns the server's capabilities",
		params: wire.Params[protocol.MethodInitialize], result: `{"$ref":"#/components/schemas/InitializeResult"}`,
		errors: []int{protocol.CodeInvalidRequest, protocol.CodeInvalidParams}},
	{name: protocol.MethodInitialized, from: fromClient, summary: "accepted; no effect", notification: true},
	{name: protocol.MethodRun, from: fromClient, summary: "runs one program; a failing program is a result with error, never a JSON-RPC error",
		params: wire.Params[protocol.MethodRun], result: `{"$ref":"#/components/schemas/RunResult"}`,
		errors: append([]int{protocol.CodeInvalidParams, protocol.CodeQueueFull, protocol.CodeUnknownSession}, lifecycleErrors...),
		serve:  (*Server).run},
	{name: protocol.MethodDescribe, from: fromClient, summary: "the Python stubs of a run's bindings, for a model's prompt",
		params: wire.Params[protocol.MethodDescribe], result: `{"type":"object","required":["stubs"],"properties":{"stubs":{"type":"string"}}}`,
		errors: append([]int{protocol.CodeInvalidParams, protocol.CodeInternalError}, lifecycleErrors...),
		serve:  (*Server).describe},
	{name: protocol.MethodCancelRequest, from: fromEither, notification: true,
		summary: "client → daemon: cancels the run with that request id; daemon → client: a binding/call whose answer is no longer needed",
		params:  wire.Params[protocol.MethodCancelRequest]},
	{name: protocol.MethodShutdown, from: fromClient, summary: "stops accepting runs, ends every run and session, answers null when every child is gone",
		result: `{"type":"null"}`, errors: lifecycleErrors,
		serve: func(s *Server, id reqID, _ []byte) { s.shutdown(id) }},
	{name: protocol.MethodExit, from: fromClient, summary: "exits the process: status 0 after shutdown, else 1", notification: true},
	{name: protocol.MethodSessionOpen, from: fromClient, summary: "opens a persistent session", sessions: true,
		params: wire.Params[protocol.MethodSessionOpen], result: `{"$ref":"#/components/schemas/SessionRef"}`,
		errors: append([]int{protocol.CodeInvalidParams, protocol.CodeSessionCap, protocol.CodeInternalError}, lifecycleErrors...),
		serve:  (*Server).sessionOpen},
	{name: protocol.MethodSessionFork, from: fromClient, summary: "copies an idle session into a new one, after the source's earlier runs", sessions: true,
		params: wire.Params[protocol.MethodSessionFork], result: `{"$ref":"#/components/schemas/SessionRef"}`,
		errors: append([]int{protocol.CodeInvalidParams, protocol.CodeSessionCap, protocol.CodeUnknownSession, protocol.CodeInternalError}, lifecycleErrors...),
		serve:  (*Server).sessionFork},
	{name: protocol.MethodSessionClose, from: fromClient, summary: "ends a session; answers null once its child is gone", sessions: true,
		params: wire.Params[protocol.MethodSessionClose], result: `{"type":"null"}`,
		errors: append([]int{protocol.CodeInvalidParams, protocol.CodeUnknownSession}, lifecycleErrors...),
		serve:  (*Server).sessionClose},
	{name: protocol.MethodDiscover, from: fromClient, summary: "this document (OpenRPC 1.3)",
		result: `{"type":"object","required":["openrpc","info","methods"]}`, errors: lifecycleErrors},

	{name: protocol.MethodBindingCall, summary: "the program awaits a binding; answer with its value or an error whose message the program raises", from: fromDaemon,
		params: []wire.Param{
			{Name: "runId", Required: true, Summary: "the id of the run request", Schema: `{"type":["integer","string"]}`},
			{Name: "namespace", Required: true, Summary: "the binding's global", Schema: `{"type":"string"}`},
			{Name: "function", Required: true, Summary: "the function's name", Schema: `{"type":"string"}`},
			{Name: "args", Required: true, Summary: "the program's argument, lossless JSON", Schema: `true`},
			{Name: "traceparent", Summary: "the W3C trace context of the daemon's span for the call", Schema: `{"type":"string"}`},
		},
		result: `true`},
	{name: protocol.MethodRunLog, summary: "a change to a streaming run's log", from: fromDaemon, notification: true,
		params: []wire.Param{
			{Name: "runId", Required: true, Summary: "the id of the run request", Schema: `{"type":["integer","string"]}`},
			{Name: "index", Required: true, Summary: "the entry's index in the result's logs", Schema: `{"type":"integer","minimum":0}`},
			{Name: "text", Required: true, Summary: "the entry's text, or the fragment added to it", Schema: `{"type":"string"}`},
			{Name: "continued", Required: true, Summary: "true: text continues the entry at index", Schema: `{"type":"boolean"}`},
		}},
	{name: protocol.MethodRunOutput, summary: "an object a streaming run displayed", from: fromDaemon, notification: true,
		params: []wire.Param{
			{Name: "runId", Required: true, Summary: "the id of the run request", Schema: `{"type":["integer","string"]}`},
			{Name: "index", Required: true, Summary: "its index in the result's outputs", Schema: `{"type":"integer","minimum":0}`},
			{Name: "data", Required: true, Summary: "MIME type to data: base64 for binary types, text for text types", Schema: `{"$ref":"#/components/schemas/MimeBundle"}`},
		}},
	{name: protocol.MethodSessionClosed, summary: "a session the daemon ended by itself", from: fromDaemon, notification: true,
		params: []wire.Param{
			{Name: "sessionId", Required: true, Summary: "the session", Schema: `{"type":"string"}`},
			{Name: "reason", Required: true, Summary: "why it ended", Schema: `{"enum":["idle","lost","shutdown"]}`},
			{Name: "message", Required: true, Summary: "what happened, for people", Schema: `{"type":"string"}`},
		}},
}

// servedRequest is the client → daemon request named name that the table
// serves, or nil.
func servedRequest(name string) *method {
	for i := range methods {
		m := &methods[i]
		if m.name == name && m.serve != nil {
			return m
		}
	}
	return nil
}
