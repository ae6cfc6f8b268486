// Package coderun is the Go client of coderun-rpc: it starts the daemon (or
// connects to one in service mode), sends it Python programs written by a
// language model, answers the programs' binding calls with Go functions, and
// returns each run's result with its value kept exactly as the daemon sent it.
//
// It speaks JSON-RPC 2.0 through github.com/sourcegraph/jsonrpc2: the
// library's Conn over NewObjectStream (Content-Length framing, bounded) on
// the daemon's stdio, a unix socket or a TCP connection of `coderun-rpc
// serve`, and over the library's websocket ObjectStream on a WebSocket of
// `serve`.
//
// # Values
//
// A program's value, a binding's arguments and a displayed object's data are
// json.RawMessage: the bytes the daemon sent, never decoded through float64,
// so an integer beyond 2^53 stays exact. A typed binding's arguments are
// decoded into its Go type by encoding/json, which reads integers into int64
// or uint64 fields exactly; a value of type any receives json.Number. Text
// the client decodes into Go strings (Result.Logs, LogEvent.Text, an
// Output's data) holds a lone surrogate a program printed as U+FFFD, as
// encoding/json decodes it.
//
// # Errors
//
// A program that fails is an error value: Run returns the Result (logs and
// stats included) together with a *RunError that carries the failure's Kind
// ("exception", "timeout", "abort", "worker-exit", "invalid-output",
// "output-limit"). A request the daemon refuses is a *jsonrpc2.Error with its
// code (-32602 for invalid params, -32004 for a session that is not open).
// Losing the daemon is ErrConnectionLost, with the tail of its log when this
// client started it.
//
// # Cancellation
//
// Cancelling the context of Run sends $/cancelRequest for the run; Run then
// waits for the daemon's answer (the run settles "abort" and is answered
// exactly once) and returns a *RunError whose Unwrap is the context's error.
// A daemon that has not answered once its grace (capabilities.limits.graceMs)
// and 5 s have passed is not waited for: Run returns the context's error.
// A binding function's context is cancelled when the daemon withdraws the
// call ($/cancelRequest) or the connection ends.
//
// # Module
//
// The package lives in the daemon's own Go module rather than a module of its
// own: its end-to-end tests build and drive the daemon of the same commit,
// it shares the protocol's constants and the lossless-JSON check with the
// daemon (packages protocol and wireguard, standard library only), and one
// go.mod keeps the two from drifting. A Go program that uses it imports
// github.com/coderun-rpc/coderun-rpc/clients/go and receives the daemon's
// source with it, not its binary.
//
// # Concurrency
//
// A Client and its Sessions are safe for concurrent use; runs proceed side by
// side up to the daemon's CODERUN_MAX_CONCURRENT_RUNS. Log and output
// callbacks run on the connection's read goroutine, one at a time in arrival
// order, and must return quickly; binding functions each run on a goroutine
// of their own.
package coderun
