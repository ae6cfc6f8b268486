package rpc

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
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
	params       []descriptor
	result       string // JSON Schema text of the result
	errors       []int  // the codes it may be answered with (errorMessages)
	// sessions: served only while sessions are on (docs/protocol.md §11).
	sessions bool
	// serve answers a client → daemon request from the read loop. nil for
	// initialize and rpc.discover, which request serves itself (the first
	// needs the lifecycle state; the second reads this table, which may not
	// refer to it).
	serve func(s *Server, id reqID, params []byte)
}

// descriptor is one member of a method's params, as rpc.discover shows it.
type descriptor struct {
	name, summary, schema string
	required              bool
}

// describeParams turns a validation table into its descriptors.
func descriptors[P any](rows []param[P]) []descriptor {
	out := make([]descriptor, len(rows))
	for i, r := range rows {
		out[i] = descriptor{name: r.name, summary: r.summary, schema: r.schema, required: r.required}
	}
	return out
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
		params: descriptors(initializeParams), result: `{"$ref":"#/components/schemas/InitializeResult"}`,
		errors: []int{protocol.CodeInvalidRequest, protocol.CodeInvalidParams}},
	{name: protocol.MethodInitialized, from: fromClient, summary: "accepted; no effect", notification: true},
	{name: protocol.MethodRun, from: fromClient, summary: "runs one program; a failing program is a result with error, never a JSON-RPC error",
		params: descriptors(runParams), result: `{"$ref":"#/components/schemas/RunResult"}`,
		errors: append([]int{protocol.CodeInvalidParams, protocol.CodeQueueFull, protocol.CodeUnknownSession}, lifecycleErrors...),
		serve:  (*Server).run},
	{name: protocol.MethodDescribe, from: fromClient, summary: "the Python stubs of a run's bindings, for a model's prompt",
		params: descriptors(describeRows), result: `{"type":"object","required":["stubs"],"properties":{"stubs":{"type":"string"}}}`,
		errors: append([]int{protocol.CodeInvalidParams, protocol.CodeInternalError}, lifecycleErrors...),
		serve:  (*Server).describe},
	{name: protocol.MethodCancelRequest, from: fromEither, notification: true,
		summary: "client → daemon: cancels the run with that request id; daemon → client: a binding/call whose answer is no longer needed",
		params:  descriptors(cancelParams)},
	{name: protocol.MethodShutdown, from: fromClient, summary: "stops accepting runs, ends every run and session, answers null when every child is gone",
		result: `{"type":"null"}`, errors: lifecycleErrors,
		serve: func(s *Server, id reqID, _ []byte) { s.shutdown(id) }},
	{name: protocol.MethodExit, from: fromClient, summary: "exits the process: status 0 after shutdown, else 1", notification: true},
	{name: protocol.MethodSessionOpen, from: fromClient, summary: "opens a persistent session", sessions: true,
		params: descriptors(sessionOpenParams), result: `{"$ref":"#/components/schemas/SessionRef"}`,
		errors: append([]int{protocol.CodeInvalidParams, protocol.CodeSessionCap, protocol.CodeInternalError}, lifecycleErrors...),
		serve:  (*Server).sessionOpen},
	{name: protocol.MethodSessionFork, from: fromClient, summary: "copies an idle session into a new one, after the source's earlier runs", sessions: true,
		params: descriptors(sessionRefParams), result: `{"$ref":"#/components/schemas/SessionRef"}`,
		errors: append([]int{protocol.CodeInvalidParams, protocol.CodeSessionCap, protocol.CodeUnknownSession, protocol.CodeInternalError}, lifecycleErrors...),
		serve:  (*Server).sessionFork},
	{name: protocol.MethodSessionClose, from: fromClient, summary: "ends a session; answers null once its child is gone", sessions: true,
		params: descriptors(sessionRefParams), result: `{"type":"null"}`,
		errors: append([]int{protocol.CodeInvalidParams, protocol.CodeUnknownSession}, lifecycleErrors...),
		serve:  (*Server).sessionClose},
	{name: protocol.MethodDiscover, from: fromClient, summary: "this document (OpenRPC 1.3)",
		result: `{"type":"object","required":["openrpc","info","methods"]}`, errors: lifecycleErrors},

	{name: protocol.MethodBindingCall, summary: "the program awaits a binding; answer with its value or an error whose message the program raises", from: fromDaemon,
		params: []descriptor{
			{name: "runId", required: true, summary: "the id of the run request", schema: `{"type":["integer","string"]}`},
			{name: "namespace", required: true, summary: "the binding's global", schema: `{"type":"string"}`},
			{name: "function", required: true, summary: "the function's name", schema: `{"type":"string"}`},
			{name: "args", required: true, summary: "the program's argument, lossless JSON", schema: `true`},
			{name: "traceparent", summary: "the W3C trace context of the daemon's span for the call", schema: `{"type":"string"}`},
		},
		result: `true`},
	{name: protocol.MethodRunLog, summary: "a change to a streaming run's log", from: fromDaemon, notification: true,
		params: []descriptor{
			{name: "runId", required: true, summary: "the id of the run request", schema: `{"type":["integer","string"]}`},
			{name: "index", required: true, summary: "the entry's index in the result's logs", schema: `{"type":"integer","minimum":0}`},
			{name: "text", required: true, summary: "the entry's text, or the fragment added to it", schema: `{"type":"string"}`},
			{name: "continued", required: true, summary: "true: text continues the entry at index", schema: `{"type":"boolean"}`},
		}},
	{name: protocol.MethodRunOutput, summary: "an object a streaming run displayed", from: fromDaemon, notification: true,
		params: []descriptor{
			{name: "runId", required: true, summary: "the id of the run request", schema: `{"type":["integer","string"]}`},
			{name: "index", required: true, summary: "its index in the result's outputs", schema: `{"type":"integer","minimum":0}`},
			{name: "data", required: true, summary: "MIME type to data: base64 for binary types, text for text types", schema: `{"$ref":"#/components/schemas/MimeBundle"}`},
		}},
	{name: protocol.MethodSessionClosed, summary: "a session the daemon ended by itself", from: fromDaemon, notification: true,
		params: []descriptor{
			{name: "sessionId", required: true, summary: "the session", schema: `{"type":"string"}`},
			{name: "reason", required: true, summary: "why it ended", schema: `{"enum":["idle","lost","shutdown"]}`},
			{name: "message", required: true, summary: "what happened, for people", schema: `{"type":"string"}`},
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
