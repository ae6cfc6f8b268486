// Package wire is what the daemon's front ends share: rpc (JSON-RPC on
// stdio), mcp (the MCP code-mode server) and serve (service mode) are
// siblings above it, none importing another, so a run reads, is checked and
// is reported the same way on every surface.
//
// It holds the params tables (params.go: one row per member, with its
// check, its summary and its JSON Schema; Params is what rpc.discover and
// the protocol docs' tables are generated from) and their validation, whose
// errors carry the −32602 messages of docs/protocol.md §3.4; the stubs a
// model reads (Stubs, with the header notes on imports and egress) and the
// resolution of mcp bindings to their servers' tools (ResolveMCP); the run
// result encoder (EmitRunResult) and the JSON-RPC envelope (AppendHead,
// EncodeError, ErrorBody); and the Runner and Sessions interfaces a front end
// drives a session.Manager through.
package wire
