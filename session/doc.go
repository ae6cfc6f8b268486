// Package session runs one program end to end — queue slot, staging, spawn
// (cold or warm), the fd-3 handshake, binding calls, budgets, settlement and
// the result — and the Manager that queues runs (CHILD-CONTRACT §2, §4).
//
// The handshake applies the limits before any program code runs (runc's
// procReady → setrlimit → procRun):
//
//	daemon (session)                         child (bootstrap.py)
//	      |  stage dir, spawn (or take warm)        |
//	      |  arm wall timer                         |
//	      |---- boot {cpuSeconds, AS, budgets,  --->|
//	      |           namespaces}                   | setrlimit CORE, CPU, AS
//	      |                                         | re-check output budgets
//	      |<--- done {error: exception} ------------| (limits failed: no ack)
//	      |<--- boot-ack ---------------------------| namespaces built
//	      |---- run {program} --------------------->| (first boot-ack only)
//	      |<--- log / call ... ---------------------| program runs
//	      |---- reply {id, ok, value|message} ----->|
//	      |<--- done {value | error} ---------------| settle in the child
//	      |  decide, SIGTERM group, grace, SIGKILL  |
//	      |  close = reaped + fd 3/1/2 at EOF       |
//	      |  settle: remove dir, deliver result     |
//
// Concurrency inside one run: r.mu guards every piece of run state,
// including the wireguard.Capture (not concurrency-safe). Client calls are
// never made under r.mu; they go through an ordered outbox drained under
// r.sendMu, so run/log notifications, binding/call requests, their
// cancellations and finally the result reach the client in ledger / fd-3
// frame order, and no decision ever waits on the client.
package session
