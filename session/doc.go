// Package session runs one program end to end — queue slot, staging, spawn
// (cold or warm), the fd-3 handshake, binding calls, budgets, settlement and
// the result — and the Manager that queues runs (docs/child-protocol-wire.md §2, child-protocol-daemon.md §4).
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
// Inside one run (Run), three parts each own their synchronisation:
//
//   - the state machine (machine, machine.go): the run's state (queued,
//     starting, live, decided, settled, quiescent) and everything the
//     contract's settlement rules read, including the wireguard.Capture (not
//     concurrency-safe). It is guarded by the run's mutex and changes only in
//     machine.step, which does no I/O: the readers, the reaper, the timers
//     and the client's answers post events (Run.dispatch), and the effects
//     step returns (signals, directory removal, restart, the result's
//     release) are performed after unlocking.
//   - the fd-3 writer (fdWriter, writer.go): boot, run and reply frames to
//     one child, in order, under its own lock.
//   - the outbox (outbox, outbox.go): the ordered client deliveries — run/log
//     notifications, binding/call requests, their cancellations and finally
//     the result, in ledger / fd-3 frame order. Client calls are never made
//     under a run lock, and no decision ever waits on the client.
//
// Typed bindings (docs/protocol-typed.md §10) add two checks around a call, both outside the
// run's lock: the fd-3 reader checks a typed call's arguments against its
// parameters schema before the call is accepted (a refusal is answered with
// a typeError reply, never sent to the client, never counted), and the
// client's answer is checked against its returns schema after the lossless
// rules. The checks come with the validated params (protocol.Checker).
//
// Locks are taken in one order: the outbox's delivery lock, then the run's
// mutex, then the writer's or the outbox's queue lock.
package session
